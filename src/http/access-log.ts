import type { ParameterizedContext } from 'koa';
import type { Logger } from '../log/index.js';
import type { RequestState } from './state.js';

/**
 * One line per answered request (ACCESS_LOG): method, path without its query (a query may carry
 * a code or a token), status, time taken and the tenant, with the request id every line of the
 * request carries; and who called: the address (as src/http/forwarded.ts trusts it), the client_id
 * once known (the audit's, else the client oidc-provider named) and the user agent, cut to a
 * bound. Written when the answer is finished or the connection closed, so a request cut off by
 * its caller has its line too. Null when there are no lines to write.
 */
/** What a line reads of the layers above this one (the audit entry's client), declared here since http sits below them. */
type LoggedState = RequestState & { audit?: { clientId?: string | null } };

export function accessLogLine(log: Logger, enabled: boolean) {
  const access = log.child({ component: 'access' });
  if (!enabled) return null;
  return (ctx: ParameterizedContext<LoggedState>): void => {
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
          ip: ctx.ip,
          ...clientOf(ctx),
          ...userAgentOf(ctx),
        },
        'request',
      );
    });
  };
}

/** A user agent is the caller's text: a long one must not make every line long. */
const USER_AGENT_CHARACTERS = 256;

function userAgentOf(ctx: ParameterizedContext<LoggedState>): { userAgent?: string } {
  const agent = ctx.get('user-agent');
  return agent ? { userAgent: agent.slice(0, USER_AGENT_CHARACTERS) } : {};
}

/** The client the audit entry names (Arbiter's facts first, then oidc-provider's client), when there is one. */
function clientOf(ctx: ParameterizedContext<LoggedState>): { clientId?: string } {
  const facts = ctx.state.audit;
  const named = (ctx as unknown as { oidc?: { client?: { clientId?: string } } }).oidc?.client?.clientId;
  const clientId = facts?.clientId ?? named;
  return clientId ? { clientId } : {};
}
