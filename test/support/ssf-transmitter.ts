import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

export const CAEP_EVENT = 'https://schemas.openid.net/secevent/caep/event-type/';
export const RISC_EVENT = 'https://schemas.openid.net/secevent/risc/event-type/';

/**
 * A Shared Signals transmitter on loopback, as an upstream identity provider runs one: an ES256
 * key whose public half its /jwks serves, named by its /.well-known/ssf-configuration, and
 * Security Event Tokens (RFC 8417) signed with it and pushed as RFC 8935 says.
 */
export class SsfTransmitter {
  /** How many times the JWKS was fetched. */
  jwksFetches = 0;

  private constructor(
    readonly issuer: string,
    private readonly key: PrivateKey,
    private readonly server: Server,
  ) {}

  static async start(): Promise<SsfTransmitter> {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const jwks = JSON.stringify({
      keys: [{ ...(await exportJWK(publicKey)), kid: 'ssf-key', alg: 'ES256', use: 'sig' }],
    });
    let transmitter: SsfTransmitter | undefined;
    const server = createServer((request, response) => {
      const json = (body: string) => response.writeHead(200, { 'content-type': 'application/json' }).end(body);
      if (request.url === '/jwks') {
        transmitter!.jwksFetches += 1;
        return json(jwks);
      }
      if (request.url === '/.well-known/ssf-configuration')
        return json(JSON.stringify({ issuer: transmitter!.issuer, jwks_uri: `${transmitter!.issuer}/jwks` }));
      response.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    transmitter = new SsfTransmitter(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, privateKey, server);
    return transmitter;
  }

  /**
   * A SET of one event about `subject` (an RFC 9493 subject identifier) for `audience`, signed
   * with the transmitter's key (or `key`); `claims` and `header` override what it sets.
   */
  async set(
    audience: string,
    event: string,
    subject: Record<string, unknown>,
    options: { claims?: Record<string, unknown>; header?: Record<string, unknown>; key?: PrivateKey } = {},
  ): Promise<string> {
    return new SignJWT({
      iss: this.issuer,
      aud: audience,
      iat: Math.floor(Date.now() / 1000),
      jti: randomUUID(),
      sub_id: subject,
      events: { [event]: { event_timestamp: Math.floor(Date.now() / 1000) } },
      ...options.claims,
    })
      .setProtectedHeader({ alg: 'ES256', kid: 'ssf-key', typ: 'secevent+jwt', ...options.header })
      .sign(options.key ?? this.key);
  }

  /** Another ES256 key, to sign what the transmitter's keys do not verify. */
  static async otherKey(): Promise<PrivateKey> {
    return (await generateKeyPair('ES256')).privateKey;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** RFC 8935 §2: the SET POSTed to `url` with the bearer `secret` (none: no Authorization header). */
export function pushSet(
  url: string,
  set: string,
  secret: string | null,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/secevent+jwt',
      Accept: 'application/json',
      ...(secret === null ? {} : { Authorization: `Bearer ${secret}` }),
      ...headers,
    },
    body: set,
  });
}
