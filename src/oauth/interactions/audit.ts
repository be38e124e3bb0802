import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';

/** Sign-in errors that say something upstream failed, rather than that someone refused. */
const FAULTS = new Set(['temporarily_unavailable', 'server_error']);

interface ResumedContext {
  oidc?: { entities?: { Interaction?: { result?: { error?: unknown } } } };
}

/**
 * The audit entry of a sign-in that failed. The sign-in's own routes (/interaction, /idp/callback)
 * are not protocol endpoints; the resumption of the authorization request (/authorize/:uid) is,
 * and it is where the client is sent the error. Without this its entry would read as a plain
 * redirect that was allowed; with it, it names the error and its outcome is `error` for a fault
 * upstream, `deny` for a refusal. (The reason, which may name the upstream, is in the log.)
 */
export async function auditSignInFailure(ctx: ArbiterContext, next: Next): Promise<void> {
  await next();
  // oidc-provider resumes the authorization request with a GET (HEAD alike).
  if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return;
  const error = (ctx as ResumedContext).oidc?.entities?.Interaction?.result?.error;
  if (typeof error !== 'string') return;
  ctx.state.errorCode = error;
  const { audit } = ctx.state;
  if (audit) audit.outcome = FAULTS.has(error) ? 'error' : 'deny';
}
