/**
 * What the Shared Signals benches share (bench/policy-signals.ts, bench/signals-delivery.ts): a
 * client's token, and a receiver (a client of the tenant with `ssf.manage`) with one stream.
 */
import bcrypt from 'bcryptjs';
import { basic, FORM } from '../test/support/oauth.js';
import type { TestServer } from '../test/support/server.js';

export const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';

export interface Client {
  id: string;
  secret: string;
}

/** A client_credentials access token of `client` for `scope`. */
export async function tokenOf(server: TestServer, client: Client, scope: string): Promise<string> {
  const response = await server.request('/token', {
    method: 'POST',
    headers: { ...FORM, Authorization: basic(client.id, client.secret) },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope }).toString(),
  });
  const body = (await response.json()) as { access_token?: string };
  if (!body.access_token) throw new Error(`no token: ${response.status}`);
  return body.access_token;
}

/**
 * The receiver `receiverId` (made here) and its stream of `delivery` (`{method: …}` as SSF 1.0 §8.1.1
 * takes it) for CAEP session-revoked about every subject; the stream's id.
 */
export async function receiverStream(
  server: TestServer,
  receiverId: string,
  delivery: Record<string, unknown>,
): Promise<string> {
  const receiver = { id: receiverId, secret: `${receiverId}-bench-secret` };
  await server.admin('POST', '/clients', {
    clientId: receiver.id,
    clientType: 'confidential',
    clientSecret: bcrypt.hashSync(receiver.secret, 4),
    scopes: ['ssf.manage'],
  });
  const token = await tokenOf(server, receiver, 'ssf.manage');
  const created = await server.request('/ssf/streams', {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ delivery, events_requested: [SESSION_REVOKED] }),
  });
  if (created.status !== 201) throw new Error(`stream not created: ${created.status} ${await created.text()}`);
  return ((await created.json()) as { stream_id: string }).stream_id;
}
