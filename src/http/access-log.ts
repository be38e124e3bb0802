import type { Context, Next } from 'koa';
import type { Logger } from '../log/index.js';

/**
 * One line per answered request (ACCESS_LOG): method, path without its query (a query may carry
 * a code or a token), status, time taken and the tenant, with the request id every line of the
 * request carries. Written when the answer is finished or the connection closed, so a request
 * cut off by its caller has its line too.
 */
export function accessLog(log: Logger, enabled: boolean) {
  const access = log.child({ component: 'access' });
  return async (ctx: Context, next: Next): Promise<void> => {
    if (!enabled || !access.isLevelEnabled('info')) return next();
    const started = process.hrtime.bigint();
    const { requestId } = ctx.state as { requestId?: string };
    ctx.res.once('close', () => {
      const tenant = (ctx.state as { tenant?: { name?: string } }).tenant?.name;
      access.info(
        {
          requestId,
          method: ctx.method,
          path: ctx.path,
          status: ctx.res.writableFinished ? ctx.status : 499,
          ms: Math.round(Number(process.hrtime.bigint() - started) / 1e4) / 100,
          ...(tenant ? { tenant } : {}),
        },
        'request',
      );
    });
    await next();
  };
}
