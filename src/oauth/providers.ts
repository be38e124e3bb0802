import type Koa from 'koa';
import type { Middleware } from 'koa';
import mount from 'koa-mount';
import type Provider from 'oidc-provider';

/**
 * One oidc-provider instance per tenant, created on first use and cached: the issuer is
 * fixed per instance, and each instance sees only its tenant's view of the store.
 */
export class TenantProviders {
  private readonly mounted = new Map<string, { provider: Provider; middleware: Middleware }>();

  constructor(private readonly create: (tenant: string) => Provider) {}

  provider(tenant: string): Provider {
    return this.entry(tenant).provider;
  }

  /** Hands the request to the provider of `ctx.state.tenant`. */
  middleware(): Middleware {
    return (ctx, next) => this.entry(ctx.state.tenant as string).middleware(ctx, next);
  }

  private entry(tenant: string) {
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
