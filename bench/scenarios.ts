/**
 * The hot-path scenarios, each as the same request on both servers. The code exchange consumes
 * what it sends: it has a pool of codes made ahead, one per request. A refresh does not: the bench
 * client is confidential, and neither server rotates a confidential client's refresh token before
 * 70% of its lifetime (src/oauth/token-shaping.ts, mirrored by baseline.ts), so the refresh
 * scenario cycles through refresh tokens made ahead, and its check makes sure that no new refresh
 * token comes back (a rotation would make reuse a replay).
 */
import { randomBytes } from 'node:crypto';
import { basic, FORM } from '../test/support/oauth.js';
import type { AssertionSpec } from './assertion.js';
import { codeExchange, type BenchClients, type Target } from './servers.js';

export interface RequestSpec {
  path: string;
  headers: Record<string, string>;
  /** The same body for every request; */
  body?: string;
  /** or a freshly signed client assertion per request; */
  assertion?: AssertionSpec;
  /** or one body per request, `count` of them made ahead (each consumed by its request); */
  pool?: (count: number) => Promise<string[]>;
  /** or bodies made ahead that the requests take in turn, over and over. */
  cycle?: () => Promise<string[]>;
  /** Why this server's request differs from the other's, if it does. */
  note?: string;
}

export interface Scenario {
  name: string;
  request(target: Target): RequestSpec;
  /** What a correct answer to `sent` holds: undefined when `body` is right, else what is wrong. */
  check(body: Record<string, unknown>, sent: string): string | undefined;
}

/** Refresh tokens the refresh scenario cycles through (each belongs to a grant of its own). */
const REFRESH_TOKENS = 512;

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

const opaqueAccessToken = (body: Record<string, unknown>) =>
  typeof body.access_token !== 'string'
    ? 'no access_token'
    : body.access_token.includes('.')
      ? 'the access token is not opaque'
      : undefined;

export function scenarios(clients: BenchClients): Scenario[] {
  const machine = { ...FORM, authorization: basic(clients.machine.id, clients.machine.secret) };
  const resourceServer = { ...FORM, authorization: basic(clients.resourceServer.id, clients.resourceServer.secret) };
  const web = { ...FORM, authorization: basic(clients.web.id, clients.web.secret) };
  const introspectBasic = (token: string): Pick<RequestSpec, 'path' | 'headers' | 'body'> => ({
    path: '/introspect',
    headers: resourceServer,
    body: form({ token }),
  });
  // As long as oidc-provider's own values (43 base64url characters), never issued.
  const unknownToken = randomBytes(32).toString('base64url');
  // Made once per server: the check and the measurement use the same tokens.
  const refreshPools = new Map<Target, Promise<string[]>>();
  const refreshBodies = (target: Target) => {
    if (!refreshPools.has(target))
      refreshPools.set(
        target,
        target
          .mintRefreshTokens(REFRESH_TOKENS)
          .then((tokens) => tokens.map((token) => form({ grant_type: 'refresh_token', refresh_token: token }))),
      );
    return refreshPools.get(target)!;
  };

  return [
    {
      name: 'client_credentials, client_secret_basic',
      request: () => ({
        path: '/token',
        headers: machine,
        body: form({ grant_type: 'client_credentials', scope: 'read' }),
      }),
      check: opaqueAccessToken,
    },
    {
      name: 'client_credentials, private_key_jwt',
      request: (target) => ({
        path: '/token',
        headers: FORM,
        assertion: {
          privateJwk: clients.keyed.privateJwk,
          clientId: clients.keyed.id,
          audience: target.issuer,
          form: form({ grant_type: 'client_credentials', scope: 'read' }),
        },
      }),
      check: opaqueAccessToken,
    },
    {
      name: 'introspect valid token, Bearer caller',
      request: (target) =>
        target.callerToken
          ? {
              path: '/introspect',
              headers: { ...FORM, authorization: `Bearer ${target.callerToken}` },
              body: form({ token: target.validToken }),
            }
          : {
              ...introspectBasic(target.validToken),
              note: 'Basic caller: oidc-provider has no Bearer callers at introspection',
            },
      check: (body) => (body.active === true ? undefined : 'not active'),
    },
    {
      name: 'introspect valid token, Basic caller',
      request: (target) => introspectBasic(target.validToken),
      check: (body) => (body.active === true ? undefined : 'not active'),
    },
    {
      name: 'introspect unknown token, Basic caller',
      request: () => introspectBasic(unknownToken),
      check: (body) => (body.active === false && Object.keys(body).length === 1 ? undefined : 'not {"active":false}'),
    },
    {
      name: 'authorization_code exchange (PKCE)',
      request: (target) => ({
        path: '/token',
        headers: web,
        pool: async (count) => (await target.mintCodes(count)).map((code) => form(codeExchange(code))),
      }),
      check: (body) =>
        opaqueAccessToken(body) ??
        (typeof body.id_token !== 'string'
          ? 'no id_token'
          : typeof body.refresh_token !== 'string'
            ? 'no refresh_token'
            : undefined),
    },
    {
      name: 'refresh_token',
      request: (target) => ({ path: '/token', headers: web, cycle: () => refreshBodies(target) }),
      check: (body, sent) =>
        opaqueAccessToken(body) ??
        (typeof body.id_token !== 'string'
          ? 'no id_token'
          : body.refresh_token !== undefined && body.refresh_token !== new URLSearchParams(sent).get('refresh_token')
            ? 'the refresh token was rotated: reusing it would be a replay'
            : undefined),
    },
  ];
}
