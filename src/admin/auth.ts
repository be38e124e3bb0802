import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, Next } from 'koa';
import { markAuthenticated } from '../audit/facts.js';
import { guardCredential } from '../http/auth-failures.js';
import { HttpError } from '../http/errors.js';

/** Whom failed Admin keys count against (there is one key). */
const ADMIN_KEY_IDENTITY = 'admin-key';

/** Guards the Admin API with X-Admin-API-Key, compared in constant time (digests hide the key's length). */
export function requireAdminKey(adminApiKey: string) {
  const expected = digest(adminApiKey);
  return async (ctx: Context, next: Next): Promise<void> => {
    const presented = ctx.get('x-admin-api-key');
    if (presented) await guardCredential(ctx, ADMIN_KEY_IDENTITY);
    if (!presented || !timingSafeEqual(digest(presented), expected)) {
      ctx.set('WWW-Authenticate', 'X-Admin-API-Key');
      throw new HttpError(
        401,
        'unauthorized',
        presented ? 'the X-Admin-API-Key is not valid' : 'the X-Admin-API-Key header is required',
      );
    }
    markAuthenticated(ctx.state);
    await next();
  };
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}
