import { createHash } from 'node:crypto';
import type { Context, Next } from 'koa';
import { notFound, unsupportedMethod } from '../../http/errors.js';
import { isAdminPath } from '../../http/admin-path.js';
import { CONSOLE_BUILD_DIR, readConsole, type ConsoleAsset } from './assets.js';

type TaggedAsset = ConsoleAsset & { etag: string };

export const CONSOLE_PATH = '/admin';
const ASSETS_PREFIX = `${CONSOLE_PATH}/assets/`;

/**
 * Stricter than the server-wide policy (which must let oidc-provider's inline pages through):
 * the console runs nothing but its own bundle, talks only to this origin, is never framed.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The operators' web console: GET /admin (the page) and /admin/assets/<name> (its bundle,
 * stylesheet and icon), as `npm run build` wrote them into `dir`. Assets are looked up by exact
 * name in the set read at the first request, so no request path ever reaches the file system. The page holds no secret: the Admin API key is typed into it and
 * sent by the browser as X-Admin-API-Key, so these routes need none.
 */
export function adminConsole(dir: string = CONSOLE_BUILD_DIR) {
  let built: Promise<Map<string, TaggedAsset>> | undefined;
  // Read on first use, once per process; a failed read (no build yet) is retried by the next request.
  const assets = () =>
    (built ??= withEtags(readConsole(dir)).catch((error: unknown) => {
      built = undefined;
      throw error;
    }));
  return async (ctx: Context, next: Next): Promise<void> => {
    const name = assetName(ctx.path);
    if (name === undefined) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') throw unsupportedMethod();
    const asset = (await assets()).get(name);
    if (!asset) throw notFound(`no console asset ${JSON.stringify(name)}`);
    ctx.set('Content-Security-Policy', CONSOLE_CSP);
    // Always revalidated (the ETag makes that a 304), so a new bundle is picked up at once.
    ctx.set('Cache-Control', 'no-cache');
    ctx.etag = asset.etag;
    ctx.type = asset.type;
    ctx.status = 200;
    if (ctx.fresh) {
      ctx.status = 304;
      return;
    }
    ctx.body = asset.body;
  };
}

function assetName(path: string): string | undefined {
  if (path === CONSOLE_PATH || path === `${CONSOLE_PATH}/`) return 'index.html';
  // Every other request (/token, /introspect, …) is passed on after one prefix test. A spelling of
  // the Admin API under the assets (say /admin/assets/../api/clients) is the gate's to answer: key first.
  if (!path.startsWith(ASSETS_PREFIX) || isAdminPath(path)) return undefined;
  return path.slice(ASSETS_PREFIX.length);
}

async function withEtags(assets: Promise<Map<string, ConsoleAsset>>): Promise<Map<string, TaggedAsset>> {
  const tagged = new Map<string, TaggedAsset>();
  for (const [name, asset] of await assets)
    tagged.set(name, { ...asset, etag: createHash('sha256').update(asset.body).digest('base64url').slice(0, 27) });
  return tagged;
}
