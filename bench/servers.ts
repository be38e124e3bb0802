/**
 * The two servers of a run, set up alike: the same clients (Arbiter's through the Admin API with
 * BCrypt cost-10 hashes; the baseline's as static metadata with the plain secrets), one sign-in
 * of `alice` through a browser-like user agent, and the tokens the introspection scenarios read.
 * Codes and refresh tokens are made the same way on both: one authorization request per code with
 * the signed-in session (no interaction), and one code exchange per refresh token.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import bcrypt from 'bcryptjs';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import type { ClientMetadata } from 'oidc-provider';
import type { TtlConfig } from '../src/config/index.js';
import { openArbiterStore as openStore } from '../src/collections.js';
import { FetchUserAgent } from '../test/support/browser.js';
import { arrivingAt, passDevIdpForms, startRegisteredDevIdp } from '../test/support/dev-idp.js';
import { basic, FORM } from '../test/support/oauth.js';
import { startTestServer } from '../test/support/server.js';
import { startProcessServer } from '../test/support/server-process.js';
import { startBaseline } from './baseline.js';
import type { LoadGenerator, LoadResult } from './load.js';

/** The production cost of the secrets Arbiter hashes itself (src/oauth/clients/secrets.ts). */
export const BCRYPT_COST = 10;
export const REDIRECT_URI = 'http://127.0.0.1:1/bench/callback';
/** One PKCE verifier for every code: its check costs the same whatever its value. */
const CODE_VERIFIER = randomBytes(32).toString('base64url');
const CODE_CHALLENGE = createHash('sha256').update(CODE_VERIFIER).digest('base64url');
const PREP_CONCURRENCY = 16;

export interface BenchClients {
  /** client_credentials with client_secret_basic; also the owner of the introspected token and of the Bearer caller's token. */
  machine: { id: string; secret: string };
  /** client_credentials with private_key_jwt (ES256). */
  keyed: { id: string; privateJwk: JWK; publicJwk: JWK };
  /** A resource server introspecting with client_secret_basic. */
  resourceServer: { id: string; secret: string };
  /** The code flow's confidential client (client_secret_basic, PKCE). */
  web: { id: string; secret: string };
}

export async function benchClients(): Promise<BenchClients> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const kid = randomUUID();
  const secret = () => randomBytes(24).toString('base64url');
  return {
    machine: { id: 'bench-machine', secret: secret() },
    keyed: {
      id: 'bench-keyed',
      privateJwk: { ...(await exportJWK(privateKey)), kid, alg: 'ES256' },
      publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' },
    },
    resourceServer: { id: 'bench-rs', secret: secret() },
    web: { id: 'bench-web', secret: secret() },
  };
}

export interface Target {
  name: 'Arbiter' | 'baseline';
  /** How the table names it when several of one kind run (`Arbiter WORKERS=2`); default: `name`. */
  label?: string;
  /** Loopback base URL (also the issuer: aud of client assertions). */
  url: string;
  issuer: string;
  /** A valid access token of `machine` (scope read), introspected by the valid-token scenarios. */
  validToken: string;
  /** An access token of `machine` with scope introspection: the Bearer caller (Arbiter only). */
  callerToken?: string;
  /** Codes made with the signed-in session, one authorization request each. */
  mintCodes(count: number): Promise<string[]>;
  /** Refresh tokens, one code exchange each. */
  mintRefreshTokens(count: number): Promise<string[]>;
  close(): Promise<void>;
}

/**
 * Arbiter, with its lifetimes (the baseline is given the same): in this process, or with
 * `workers` as `npm start` runs it (src/main.ts as processes of their own, WORKERS=`workers`).
 */
export async function startArbiter(
  clients: BenchClients,
  { workers }: { workers?: number } = {},
): Promise<Target & { ttl: TtlConfig }> {
  const server = workers ? await startProcessServer({ WORKERS: String(workers) }) : await startTestServer();
  const closers: (() => Promise<void>)[] = [() => server.close()];
  try {
    await server.waitUntilReady();
    const idp = await startRegisteredDevIdp(server);
    closers.unshift(idp.close);
    const hash = (secret: string) => bcrypt.hashSync(secret, BCRYPT_COST);
    const records = [
      {
        clientId: clients.machine.id,
        clientType: 'confidential',
        clientSecret: hash(clients.machine.secret),
        scopes: ['read', 'introspection'],
      },
      {
        clientId: clients.keyed.id,
        clientType: 'confidential',
        tokenEndpointAuthMethod: 'private_key_jwt',
        jwks: { keys: [clients.keyed.publicJwk] },
        scopes: ['read'],
      },
      // Entitled to introspect (policies/arbiter/introspect/introspect.rego: granted resource urn:as:introspect).
      {
        clientId: clients.resourceServer.id,
        clientType: 'confidential',
        clientSecret: hash(clients.resourceServer.secret),
        grantedResources: [{ type: 'urn:as:introspect', scopes: ['introspection'] }],
      },
      {
        clientId: clients.web.id,
        clientType: 'confidential',
        clientSecret: hash(clients.web.secret),
        redirectUris: [REDIRECT_URI],
        scopes: ['openid', 'profile', 'email'],
      },
    ];
    for (const record of records) {
      const created = await server.admin('POST', '/clients', record);
      if (created.status !== 201)
        throw new Error(
          `Arbiter: client ${record.clientId} not created: ${created.status} ${JSON.stringify(created.body)}`,
        );
    }
    return {
      ...(await prepareTarget('Arbiter', server.url, server.config.issuer, clients, () => closeAll(closers))),
      ...(workers ? { label: `Arbiter WORKERS=${workers}` } : {}),
      ttl: server.config.ttl,
    };
  } catch (error) {
    await closeAll(closers);
    throw error;
  }
}

/** `storeUrl`: the baseline keeps its artefacts in that Arbiter store (a STORE_URL) instead of in memory. */
export async function startBaselineTarget(clients: BenchClients, ttl: TtlConfig, storeUrl?: string): Promise<Target> {
  const machine: ClientMetadata = {
    client_id: clients.machine.id,
    client_secret: clients.machine.secret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
  };
  const metadata: ClientMetadata[] = [
    machine,
    {
      client_id: clients.keyed.id,
      token_endpoint_auth_method: 'private_key_jwt',
      jwks: { keys: [clients.keyed.publicJwk] },
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
    },
    {
      client_id: clients.resourceServer.id,
      client_secret: clients.resourceServer.secret,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
    },
    {
      client_id: clients.web.id,
      client_secret: clients.web.secret,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: [REDIRECT_URI],
    },
  ];
  const baseline = await startBaseline({
    ttl,
    clients: metadata,
    store: storeUrl ? await openStore(storeUrl) : undefined,
  });
  try {
    return await prepareTarget('baseline', baseline.url, baseline.issuer, clients, baseline.close);
  } catch (error) {
    await baseline.close();
    throw error;
  }
}

async function prepareTarget(
  name: Target['name'],
  url: string,
  issuer: string,
  clients: BenchClients,
  close: () => Promise<void>,
): Promise<Target> {
  const machineToken = async (scope: string) =>
    (
      await tokenRequest(
        url,
        basic(clients.machine.id, clients.machine.secret),
        { grant_type: 'client_credentials', scope },
        name,
      )
    ).access_token as string;
  const validToken = await machineToken('read');
  const callerToken = name === 'Arbiter' ? await machineToken('introspection') : undefined;
  const session = await signIn(url, clients.web.id);
  const webAuthorization = basic(clients.web.id, clients.web.secret);

  const mintCodes = (count: number) =>
    inParallel(count, async () => {
      const response = await fetch(`${url}/authorize?${authorizationQuery(clients.web.id)}`, {
        redirect: 'manual',
        headers: { cookie: session },
      });
      await response.body?.cancel();
      const code = response.headers.get('location')
        ? new URL(response.headers.get('location')!, url).searchParams.get('code')
        : null;
      if (!code)
        throw new Error(
          `${name}: the authorization request with a session made no code: ${response.status} ${response.headers.get('location')}`,
        );
      return code;
    });

  const mintRefreshTokens = async (count: number) => {
    const codes = await mintCodes(count);
    let next = 0;
    return inParallel(count, async () => {
      const tokens = await tokenRequest(url, webAuthorization, codeExchange(codes[next++]!), name);
      if (typeof tokens.refresh_token !== 'string')
        throw new Error(`${name}: the code exchange issued no refresh token: ${JSON.stringify(tokens)}`);
      return tokens.refresh_token;
    });
  };

  return { name, url, issuer, validToken, callerToken, mintCodes, mintRefreshTokens, close };
}

/** The token request form redeeming `code` (the client authenticates with Basic). */
export function codeExchange(code: string): Record<string, string> {
  return { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: CODE_VERIFIER };
}

function authorizationQuery(clientId: string): URLSearchParams {
  return new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT_URI,
    scope: 'openid profile',
    state: randomBytes(8).toString('base64url'),
    code_challenge: CODE_CHALLENGE,
    code_challenge_method: 'S256',
  });
}

/** Signs alice in (Arbiter: at the development IdP; baseline: oidc-provider's development interactions); answers the session's cookie header. */
async function signIn(url: string, clientId: string): Promise<string> {
  const agent = new FetchUserAgent();
  const loginPage = await agent.navigate(`${url}/authorize?${authorizationQuery(clientId)}`, arrivingAt(REDIRECT_URI));
  const arrived = await passDevIdpForms(agent, loginPage, 'alice', arrivingAt(REDIRECT_URI));
  if (!arrived.url.searchParams.get('code'))
    throw new Error(
      `sign-in at ${url} did not end with a code: ${arrived.url.href} ${arrived.status ?? ''} ${arrived.body?.slice(0, 300) ?? ''}`,
    );
  // FetchUserAgent keeps its jar to itself; the session cookie is what the code requests need.
  return (agent as unknown as { cookieHeader(url: URL): string }).cookieHeader(new URL(`${url}/authorize`));
}

async function tokenRequest(
  url: string,
  authorization: string,
  form: Record<string, string>,
  name: string,
): Promise<Record<string, unknown>> {
  const response = await fetch(`${url}/token`, {
    method: 'POST',
    headers: { ...FORM, authorization },
    body: new URLSearchParams(form),
  });
  const body = (await response.json()) as Record<string, unknown>;
  if (response.status !== 200)
    throw new Error(`${name}: POST /token ${form.grant_type} answered ${response.status} ${JSON.stringify(body)}`);
  return body;
}

/** `count` results of `task`, at most PREP_CONCURRENCY in flight. */
async function inParallel<T>(count: number, task: () => Promise<T>): Promise<T[]> {
  const results: T[] = [];
  let started = 0;
  const worker = async () => {
    while (started < count) {
      started += 1;
      results.push(await task());
    }
  };
  await Promise.all(Array.from({ length: Math.min(PREP_CONCURRENCY, count) }, worker));
  return results;
}

async function closeAll(closers: (() => Promise<void>)[]): Promise<void> {
  for (const close of closers) await close().catch(() => undefined);
}

/**
 * One window of live client_credentials traffic (client_secret_basic, scope read) at `url`: what
 * the benches that change something beside it (a replay, a recheck) measure their cost against.
 */
export async function clientCredentialsWindow(
  load: LoadGenerator,
  url: string,
  client: { id: string; secret: string },
  { connections, seconds }: { connections: number; seconds: number },
): Promise<LoadResult> {
  const run = await load.run({
    url: `${url}/token`,
    method: 'POST',
    headers: { ...FORM, authorization: basic(client.id, client.secret) },
    body: 'grant_type=client_credentials&scope=read',
    connections,
    warmupSeconds: 2,
    seconds,
  });
  return run.measured;
}
