import Koa from 'koa';
import { root, watched } from './dispatch.js';
import { requestFrame } from './http/request.js';
import { METRICS_PATH } from './metrics/index.js';
import { BUNDLE_PATH } from './policy/index.js';
import { PROBE_PATHS } from './probes.js';
import { routeTable, type AppParts } from './routes.js';
import type { ArbiterState } from './state.js';

export type { AppParts } from './routes.js';

/**
 * The whole HTTP surface: the global steps every request runs, then the root, which resolves
 * the tenant once and runs the request's route of the route table (src/routes.ts, where each
 * endpoint's steps are listed).
 */
export function createApp(parts: AppParts): Koa<ArbiterState> {
  const { config, log, tracing } = parts;
  // Forwarded headers reach Koa only from configured proxies (requestFrame).
  const app = new Koa<ArbiterState>({ proxy: true, maxIpsCount: 1 });
  app.silent = true;
  // First, so that the request's span covers all of it; probes, OPA's bundle polls and scrapes make none.
  if (tracing) app.use(watched(tracing.middleware([...PROBE_PATHS, BUNDLE_PATH, METRICS_PATH])));
  const { accessLog, trustedProxies, mtlsCertificateHeader } = config;
  const proxyHeaders = mtlsCertificateHeader ? [mtlsCertificateHeader] : [];
  const httpsIssuer = new URL(config.issuer).protocol === 'https:';
  app.use(watched(requestFrame({ log, accessLog, trustedProxies, proxyHeaders, httpsIssuer })));
  app.use(watched(root(routeTable(parts), config.adminPort !== null)));
  return app;
}
