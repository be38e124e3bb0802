import type Koa from 'koa';
import type { Middleware } from 'koa';
import type { ArbiterMiddleware } from './state.js';
import mount from 'koa-mount';
import { LRUCache } from 'lru-cache';
import type Provider from 'oidc-provider';

interface MountedProvider {
  provider: Provider;
  middleware: Middleware;
}

/**
 * One oidc-provider instance per tenant, created on first use: the issuer is fixed per instance,
 * and each instance sees only its tenant's view of the store. At most `maxTenants` instances are
 * kept (least recently used go first); an evicted tenant's provider is simply built again, since
 * everything it needs lives in the store.
 */
export class TenantProviders {
  private readonly mounted: LRUCache<string, MountedProvider>;

  constructor(
    private readonly create: (tenant: string) => Provider,
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

  provider(tenant: string): Provider {
    return this.entry(tenant).provider;
  }

  /** Hands the request to the provider of `ctx.state.tenant`. */
  middleware(): ArbiterMiddleware {
    return (ctx, next) => this.entry(ctx.state.tenant.name).middleware(ctx, next);
  }

  private entry(tenant: string): MountedProvider {
    let entry = this.mounted.get(tenant);
    if (!entry) {
      const provider = this.create(tenant);
      // A v9 Provider is itself the Koa application to mount.
      entry = { provider, middleware: mount(provider as unknown as Koa) as Middleware };
      this.mounted.set(tenant, entry);
    }
    return entry;
  }
}
