import type { Context } from 'koa';
import { clientIdentity, guardCredential } from '../http/auth-failures.js';
import { basicCredentials } from '../http/basic.js';
import { HttpError } from '../http/errors.js';
import type { Store } from '../store/index.js';
import { clientSecrets } from './clients/secrets.js';
import { clientsCollection } from './clients/records.js';

/** A client that authenticated with its own credentials (not a token) at one of Arbiter's APIs. */
export interface ClientCaller {
  clientId: string;
  method: 'client_secret_basic';
}

/** Authenticates `Authorization: Basic` client credentials of the request's tenant; undefined when the header is not Basic. */
export type ClientCallers = (ctx: Context) => Promise<ClientCaller | undefined>;

/**
 * client_secret_basic outside /token, checked against the stored BCrypt hash. An unknown or
 * disabled client, a public one, or a wrong secret are all the same 401 invalid_client.
 */
export function clientCallers(store: Store): ClientCallers {
  return async (ctx) => {
    const credentials = basicCredentials(ctx.get('authorization'));
    if (!credentials) return undefined;
    const { id: clientId, secret } = credentials;
    if (clientId) await guardCredential(ctx, clientIdentity(ctx.state.tenant as string, clientId));
    const record = clientId && secret ? await clientsCollection(store, ctx.state.tenant as string).findOne({ clientId }) : null;
    const stored = record?.enabled !== false && record?.clientType === 'confidential' ? record.clientSecret : null;
    if (!stored || secret!.length > 256 || !(await clientSecrets.verify(clientId!, secret!, stored))) {
      ctx.set('WWW-Authenticate', 'Basic realm="arbiter", charset="UTF-8"');
      throw new HttpError(401, 'invalid_client', 'client authentication failed');
    }
    return { clientId: clientId!, method: 'client_secret_basic' };
  };
}
