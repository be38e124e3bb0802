import type Koa from 'koa';
import type { Middleware } from 'koa';
import type { ArbiterMiddleware } from './state.js';
import mount from 'koa-mount';
import { LRUCache } from 'lru-cache';
import type Provider from 'oidc-provider';
import type { Tenant } from '../tenancy/index.js';

interface MountedProvider {
  provider: Provider;
  middleware: Middleware;
}

/**
 * One oidc-provider instance per tenant and issuer, created on first use: the issuer is fixed per
 * instance, and each instance sees only its tenant's view of the store. A tenant named by
 * X-Tenant-Id is served under the shared issuer (basePath ''), one reached at /t/<tenant> under its
 * own (basePath `/t/<tenant>`): two instances over the same records. At most `maxTenants` instances are
 * kept (least recently used go first); an evicted tenant's provider is simply built again, since
 * everything it needs lives in the store.
 */
export class TenantProviders {
  private readonly mounted: LRUCache<string, MountedProvider>;

  constructor(
    private readonly create: (tenant: string, basePath: string) => Provider,
    maxTenants: number,
  ) {
    this.mounted = new LRUCache({ max: maxTenants });
  }

  /**
   * Forgets every instance (the signing keys were rotated): each tenant's next request builds its
   * provider again with the current keys. Requests under way finish on the instance they have.
   */
  reset(): void {
    this.mounted.clear();
  }

  /** The provider of the tenant as the request named it (by X-Tenant-Id, or by its path). */
  provider(tenant: Tenant): Provider {
    return this.entry(tenant).provider;
  }

  /** Hands the request to the provider of `ctx.state.tenant`. */
  middleware(): ArbiterMiddleware {
    return (ctx, next) => this.entry(ctx.state.tenant).middleware(ctx, next);
  }

  private entry({ name, path = '' }: Tenant): MountedProvider {
    const key = `${name} ${path}`;
    let entry = this.mounted.get(key);
    if (!entry) {
      const provider = this.create(name, path);
      // A v9 Provider is itself the Koa application to mount.
      entry = { provider, middleware: mount(provider as unknown as Koa) as Middleware };
      this.mounted.set(key, entry);
    }
    return entry;
  }
}
