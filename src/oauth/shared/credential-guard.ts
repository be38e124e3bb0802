import { decodeJwt } from 'jose';
import type { Next } from 'koa';
import type { ArbiterContext } from '../state.js';
import { basicCredentials } from '../../http/basic.js';
import { clientIdentity, guardCredential } from '../../http/auth-failures.js';
import { formParameter } from './form-body.js';

/**
 * At the endpoints where oidc-provider authenticates clients (/token, /introspect, /par): names the client whose credentials a request presents (Basic, or
 * client_secret / client_assertion in the form) to the failure limiter before oidc-provider
 * verifies them, so that a client that failed too often is refused without a verification that
 * would tell a guesser when they are right (src/http/auth-failures.ts). Mount after formBody.
 */
export async function guardClientCredentials(ctx: ArbiterContext, next: Next): Promise<void> {
  if (ctx.method === 'POST') {
    const clientId = presentedClientId(ctx);
    if (clientId) await guardCredential(ctx, clientIdentity(ctx.state.tenant.name, clientId));
  }
  await next();
}

function presentedClientId(ctx: ArbiterContext): string | undefined {
  const basic = basicCredentials(ctx.get('authorization'));
  if (basic) return basic.id ?? undefined;
  if (formParameter(ctx, 'client_secret')) return formParameter(ctx, 'client_id');
  const assertion = formParameter(ctx, 'client_assertion');
  if (!assertion) return undefined;
  return formParameter(ctx, 'client_id') ?? assertionSubject(assertion);
}

/** RFC 7523 §3: the assertion's `sub` is the client id (read unverified: it only names whom a failure counts against). */
function assertionSubject(assertion: string): string | undefined {
  try {
    const { sub } = decodeJwt(assertion);
    return typeof sub === 'string' ? sub : undefined;
  } catch {
    return undefined;
  }
}
