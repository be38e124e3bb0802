import compose from 'koa-compose';
import type { Context, Middleware, Next } from 'koa';
import { authzenTenantPathOf } from './authzen/index.js';
import { HttpError, notFound } from './http/errors.js';
import { viaAdminListener } from './http/listeners.js';
import type { ArbiterContext, ArbiterMiddleware } from './state.js';
import { requestTenant, TENANT_HEADER, tenantPathOf, type TenantPath } from './tenancy/index.js';

/** Where a route is served when the admin surface has a listener of its own (ADMIN_PORT). */
export type Listener = 'public' | 'admin' | 'both';

/** One row of the route table (src/routes.ts): what runs, in order, for the paths it serves. */
export interface Route {
  /** What it serves, for the reader and for the step count (stepWatch). */
  name: string;
  /** With ADMIN_PORT, on the other listener the route's paths are a 404, as paths that name nothing. */
  listener: Listener;
  /**
   * How the request names its tenant (ctx.state.tenant), resolved once by the root before the
   * route runs: `paths` by X-Tenant-Id or a path (/t/<tenant>/…, AuthZEN's /<tenant>/access/v1/…),
   * `header` by X-Tenant-Id only; absent: the route has no tenant (and no /t/ form: a 404 there).
   */
  tenant?: 'paths' | 'header';
  steps: ArbiterMiddleware[];
}

/**
 * Test and benchmarking aid: set before the app is built, it is told of every step of the route
 * table a request runs (the global steps and its route's), so that their number can be bounded.
 * Unset (production), the steps run as they are.
 */
export const stepWatch: { onStep?: (ctx: Context, step: string) => void } = {};

/** `step`, reported to stepWatch when it runs. */
export function watched<T extends Middleware<never>>(step: T): T {
  const { onStep } = stepWatch;
  if (!onStep) return step;
  const name = step.name || 'anonymous';
  return ((ctx: Context, next: Next) => {
    onStep(ctx, name);
    return step(ctx as never, next);
  }) as unknown as T;
}

/** A route's steps as one middleware; what none of them answers is a 404 (an Arbiter API's unknown path, the console's). */
export function runRoute(route: Route): ArbiterMiddleware {
  const steps = compose(route.steps.map(watched));
  return (ctx) => steps(ctx, () => Promise.reject(notFound('no such endpoint')));
}

/**
 * The root of the route table: the tenant named by the request's path is resolved and the path
 * made the endpoint's own (`/t/acme/token` runs /token's route for tenant acme), the route is
 * looked up (`find`) and refused on the wrong listener (`splitListeners`: ADMIN_PORT is set) or
 * under /t/ when it has no tenant form, the tenant put in ctx.state.tenant once, and the route
 * run. It answers its own refusals (a malformed tenant: 400; a path naming nothing here: 404)
 * before any route, as a request that reached no endpoint: no metrics, no audit entry.
 */
export function root(find: (path: string) => Route & { run: ArbiterMiddleware }, splitListeners: boolean) {
  return async function dispatch(ctx: ArbiterContext): Promise<void> {
    const asked = ctx.path;
    let resolved: Resolved;
    try {
      resolved = resolve(ctx, find, splitListeners);
    } catch (error) {
      if (!(error instanceof HttpError)) throw error;
      ctx.status = error.status;
      ctx.body = { error: error.code, error_description: error.message };
      return;
    }
    const { route, path, byPath } = resolved;
    if (byPath?.base) (ctx as { mountPath?: string }).mountPath = byPath.base;
    if (path !== asked) ctx.path = path;
    try {
      await route.run(ctx, async () => {});
    } finally {
      if (path !== asked) ctx.path = asked;
    }
    if (byPath?.base) keepRedirectBelow(ctx, byPath.base);
  };
}

interface Resolved {
  route: Route & { run: ArbiterMiddleware };
  path: string;
  byPath: TenantPath | null;
}

function resolve(ctx: ArbiterContext, find: (path: string) => Route & { run: ArbiterMiddleware }, split: boolean) {
  const header = ctx.get(TENANT_HEADER);
  const tenantPath = tenantPathOf(ctx.path, header);
  const below = tenantPath?.rest ?? ctx.path;
  const authzenPath = authzenTenantPathOf(below, tenantPath?.id ?? header);
  const path = authzenPath?.rest ?? below;
  const route = find(path);
  if (split && !servedOn(route.listener, viaAdminListener(ctx.req))) throw notFound('no such endpoint');
  const byPath = tenantPath ?? authzenPath;
  if (byPath && route.tenant !== 'paths') throw notFound('no such endpoint');
  if (route.tenant) ctx.state.tenant = requestTenant(header, byPath);
  return { route, path, byPath };
}

function servedOn(listener: Listener, adminListener: boolean): boolean {
  return listener === 'both' || (listener === 'admin') === adminListener;
}

/** Arbiter's own redirects to paths (`/interaction/…`) get the tenant's base put in front on the way out. */
function keepRedirectBelow(ctx: ArbiterContext, base: string): void {
  const location = String(ctx.response.get('Location') ?? '');
  if (location.startsWith('/') && !location.startsWith('//') && !location.startsWith(`${base}/`))
    ctx.set('Location', `${base}${location}`);
}
