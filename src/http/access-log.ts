import type { ParameterizedContext } from 'koa';
import type { Logger } from '../log/index.js';
import type { RequestState } from './state.js';

/**
 * One line per answered request (ACCESS_LOG): method, path without its query (a query may carry
 * a code or a token), status, time taken and the tenant, with the request id every line of the
 * request carries. Written when the answer is finished or the connection closed, so a request
 * cut off by its caller has its line too. Null when there are no lines to write.
 */
export function accessLogLine(log: Logger, enabled: boolean) {
  const access = log.child({ component: 'access' });
  if (!enabled) return null;
  return (ctx: ParameterizedContext<RequestState>): void => {
    if (!access.isLevelEnabled('info')) return;
    const started = process.hrtime.bigint();
    ctx.res.once('close', () => {
      const tenant = ctx.state.tenant?.name;
      access.info(
        {
          requestId: ctx.state.requestId,
          method: ctx.method,
          path: ctx.path,
          status: ctx.res.writableFinished ? ctx.status : 499,
          ms: Math.round(Number(process.hrtime.bigint() - started) / 1e4) / 100,
          ...(tenant ? { tenant } : {}),
        },
        'request',
      );
    });
  };
}
