import Koa, { type Context, type Next } from 'koa';
import { adminRouter, unknownAdminPaths, type AdminRecord } from './admin/index.js';
import { auditTrail, type AuditLog } from './audit/index.js';
import type { Config } from './config/index.js';
import { jsonErrors, notFound } from './http/errors.js';
import type { Logger } from './log/index.js';
import { acceptPlainPkce, registrationGate, authorizeRedirectsAs302, discoveryExtras, formBody, introspectionEndpoint, noStore, syncAuthorizationDetailsTypes, tokenPrecheck, type TenantProviders } from './oauth/index.js';
import { interactionRoutes } from './oauth/interactions/index.js';
import type { PolicyEngine } from './policy/index.js';
import type { Store } from './store/index.js';
import { tenancy } from './tenancy/index.js';

export interface AppParts {
  config: Config;
  store: Store;
  policy: PolicyEngine;
  audit: AuditLog;
  providers: TenantProviders;
  log: Logger;
}

/** The whole HTTP surface as one Koa middleware stack; the order is the request's path through Arbiter. */
export function createApp(parts: AppParts): Koa {
  const { config, store, policy, audit, providers, log } = parts;
  const app = new Koa({ proxy: true });
  app.silent = true;
  app.use(auditTrail(audit, log));
  app.use(jsonErrors(log));
  app.use(health(store, policy));
  app.use(tenancy);
  app.use(noStore);
  app.use(policy.bundleMiddleware());
  const admin = adminRouter(store, {
    adminApiKey: config.adminApiKey,
    maxBodyBytes: config.maxBodyBytes,
    audit,
    checks: {
      'policy-rules': (rule) => policy.validateRule(rule.kind as 'rego' | 'cedar', rule.path as string, rule.content as string),
      'policy-data': async (data) => (isJson(data.payload as string) ? null : 'payload must be a string holding valid JSON'),
    },
    decorate: { 'policy-data': (data: AdminRecord) => ({ inBundle: isBundled(data) }) },
  });
  app.use(admin.routes());
  app.use(admin.allowedMethods({ throw: true }));
  app.use(unknownAdminPaths(config.adminApiKey));
  app.use(discoveryExtras(config.issuer, () => policy.authorizationDetailsTypes()));
  app.use(formBody(config.maxBodyBytes));
  app.use(tokenPrecheck);
  app.use(registrationGate(policy, config.maxBodyBytes));
  app.use(introspectionEndpoint({ store, policy, issuer: config.issuer, providerFor: (tenant) => providers.provider(tenant) }));
  app.use(acceptPlainPkce);
  app.use(authorizeRedirectsAs302);
  app.use(syncAuthorizationDetailsTypes((tenant) => providers.provider(tenant), () => policy.authorizationDetailsTypes()));
  app.use(interactionRoutes({ config, store, providers, log }));
  app.use(providers.middleware());
  app.use(() => {
    throw notFound('no such endpoint');
  });
  return app;
}

/** GET /healthz: 200 when the store answers and the policy engine has its bundle, 503 otherwise. */
function health(store: Store, policy: PolicyEngine) {
  return async (ctx: Context, next: Next): Promise<void> => {
    if (ctx.path !== '/healthz') return next();
    const [storeUp, policyReady] = await Promise.all([
      store.ping().then(() => true, () => false),
      policy.isReady().catch(() => false),
    ]);
    ctx.status = storeUp && policyReady ? 200 : 503;
    ctx.body = { status: ctx.status === 200 ? 'ok' : 'unavailable', store: storeUp ? 'up' : 'down', policy: policyReady ? 'ready' : 'not ready' };
  };
}

function isBundled(record: { tenantId?: unknown; version?: unknown }): boolean {
  return !record.tenantId && !record.version;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
