import * as client from 'openid-client';
import { DEV_IDP_CLIENT, startDevIdp } from '../../src/dev-idp/index.js';
import { FetchUserAgent, type Page } from './browser.js';
import { freePort, readyServer, sharedFixture, type TestServer } from './server.js';
import { startProcessServer, type ProcessServer } from './server-process.js';

export interface RegisteredDevIdp {
  issuer: string;
  /** host:port, to recognise the dev IdP's pages. */
  host: string;
  idpId: string;
  /** Internal id of the identity provider record. */
  id: number;
  /** A logout token of the dev IdP's with exactly `claims` (and its signature, `iss`, `aud`, `iat`, `exp`), as it would post one. */
  logoutToken(claims: Record<string, unknown>): Promise<string>;
  /**
   * The `sid` of the upstream session `agent` signed in with (what the dev IdP's ID tokens to
   * Arbiter carry when it was started with backchannelLogout); undefined without one.
   */
  upstreamSid(agent: FetchUserAgent): Promise<string | undefined>;
  close(): Promise<void>;
}

export interface RegistrationOptions {
  idpId?: string;
  tenantId?: string;
  /** Registers a wrong secret, to make the upstream code exchange fail. */
  clientSecret?: string;
  enabled?: boolean;
  /** The tenant's users sign in at its own issuer (`/t/<tenantId>`): the dev IdP redirects to the callback below it. */
  tenantPath?: boolean;
  /**
   * The dev IdP posts its logout tokens to Arbiter's /idp/backchannel-logout (Back-Channel Logout
   * 1.0); `'sid-only'`: tokens that name the upstream session alone, without `sub`.
   */
  backchannelLogout?: boolean | 'sid-only';
  /** More fields of the identity provider record (its Shared Signals transmitter, say). */
  fields?: Record<string, unknown>;
}

/** Starts a development IdP that redirects to `server`'s callback and registers it through the Admin API. */
export async function startRegisteredDevIdp(
  server: TestServer,
  options: RegistrationOptions = {},
): Promise<RegisteredDevIdp> {
  const port = await freePort();
  const issuer = options.tenantPath ? `${server.config.issuer}/t/${options.tenantId}` : server.config.issuer;
  // Its own callback below /idp/callback, named by the record's idpId, chosen here so that the dev IdP can register it.
  const idpId = options.idpId ?? `dev-${Math.random().toString(36).slice(2, 10)}`;
  // And the shared one, for another record of it that keeps that (sharedCallback).
  const idp = await startDevIdp({
    port,
    redirectUris: [`${issuer}/idp/callback/${idpId}`, `${issuer}/idp/callback`],
    ...(options.backchannelLogout ? { backchannelLogoutUri: `${issuer}/idp/backchannel-logout` } : {}),
    ...(options.backchannelLogout === 'sid-only' ? { logoutTokens: 'sid' as const } : {}),
  });
  try {
    const idpIssuer = `http://localhost:${port}`;
    const record = await registerIdentityProvider(server, idpIssuer, { ...options, idpId });
    const logoutToken = async (claims: Record<string, unknown>) => {
      const arbiter = await idp.provider.Client.find(DEV_IDP_CLIENT.clientId);
      const token = new idp.provider.IdToken({}, { client: arbiter });
      for (const [name, value] of Object.entries(claims)) token.set(name, value);
      return token.issue({ use: 'logout' });
    };
    return {
      issuer: idpIssuer,
      host: `localhost:${port}`,
      idpId: record.idpId,
      id: record.id,
      logoutToken,
      async upstreamSid(agent) {
        const sessionId = agent.cookie(idpIssuer, '_session');
        const session = sessionId ? await idp.provider.Session.find(sessionId) : undefined;
        return session?.authorizations?.[DEV_IDP_CLIENT.clientId]?.sid;
      },
      close: idp.close,
    };
  } catch (error) {
    await idp.close();
    throw error;
  }
}

export async function registerIdentityProvider(
  server: TestServer,
  issuer: string,
  options: RegistrationOptions = {},
): Promise<{ id: number; idpId: string }> {
  const { status, body } = await server.admin('POST', '/identity-providers', {
    issuer,
    name: 'Development IdP',
    clientId: DEV_IDP_CLIENT.clientId,
    clientSecret: options.clientSecret ?? DEV_IDP_CLIENT.clientSecret,
    ...(options.idpId ? { idpId: options.idpId } : {}),
    ...(options.enabled === undefined ? {} : { enabled: options.enabled }),
    ...(options.tenantId ? { tenantId: options.tenantId } : {}),
    ...options.fields,
  });
  if (status !== 201) throw new Error(`identity provider registration failed: ${status} ${JSON.stringify(body)}`);
  return body;
}

export interface TestClient {
  clientId: string;
  redirectUri: string;
  /** A confidential client's secret: the code is redeemed with client_secret_basic. */
  secret?: string;
}

/** A public client (PKCE, no secret) allowed openid, profile and email. */
export async function registerPublicClient(
  server: TestServer,
  redirectUri: string,
  options: { clientId?: string; tenantId?: string } = {},
): Promise<TestClient> {
  const clientId = options.clientId ?? `spa-${Math.random().toString(36).slice(2, 10)}`;
  const { status, body } = await server.admin('POST', '/clients', {
    clientId,
    clientType: 'public',
    tokenEndpointAuthMethod: 'none',
    redirectUris: [redirectUri],
    scopes: ['openid', 'profile', 'email'],
    ...(options.tenantId ? { tenantId: options.tenantId } : {}),
  });
  if (status !== 201) throw new Error(`client registration failed: ${status} ${JSON.stringify(body)}`);
  return { clientId, redirectUri };
}

export interface AuthorizationRequest {
  url: string;
  state: string;
  codeVerifier: string;
}

/** An authorization request of `testClient` at `server` with state and PKCE S256 (and any extra parameters). */
export async function authorizationRequest(
  server: TestServer,
  testClient: TestClient,
  extra: Record<string, string> = {},
): Promise<AuthorizationRequest> {
  const state = client.randomState();
  const codeVerifier = client.randomPKCECodeVerifier();
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: testClient.clientId,
    redirect_uri: testClient.redirectUri,
    scope: 'openid profile email',
    state,
    code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: 'S256',
    ...extra,
  });
  return { url: `${server.config.issuer}/authorize?${query}`, state, codeVerifier };
}

/** POST /token for a public client's code, at this server (not at its issuer, which several nodes may share). */
export async function redeemCode(
  server: TestServer,
  testClient: TestClient,
  code: string,
  codeVerifier: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any }> {
  const { clientId, secret } = testClient;
  const authorization: Record<string, string> = secret
    ? {
        authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`,
      }
    : {};
  const response = await fetch(`${server.url}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...authorization, ...headers },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: testClient.redirectUri,
      client_id: testClient.clientId,
      code_verifier: codeVerifier,
    }),
  });
  return { status: response.status, body: await response.json() };
}

/** Signs in at the dev IdP's login form (any password) and passes its consent form. */
export async function passDevIdpForms(
  agent: FetchUserAgent,
  loginPage: Page,
  login: string,
  stopAt: (url: URL) => boolean,
): Promise<Page> {
  const consentPage = await agent.submitForm(loginPage, { login, password: 'any password' }, stopAt);
  if (!consentPage.body?.includes('name="prompt" value="consent"')) return consentPage;
  return agent.submitForm(consentPage, {}, stopAt);
}

/** Stops a navigation when it is about to reach `prefix` (the client's redirect_uri, typically). */
export const arrivingAt = (prefix: string) => (url: URL) => url.href.startsWith(prefix);

/** The tokens of one sign-in: its access token and refresh token. */
export interface UserTokens {
  access: string;
  refresh: string;
}

/**
 * A browser sign-in of `login` at the development IdP (or the one `extra.upstream_idp` names)
 * for `testClient`, its code redeemed; throws unless the answer holds a refresh token.
 */
export async function signInForTokens(
  server: TestServer,
  testClient: TestClient,
  login: string,
  extra: Record<string, string> = {},
): Promise<UserTokens> {
  const { tokens } = await signedIn(server, testClient, login, extra);
  if (typeof tokens.refresh_token !== 'string')
    throw new Error(`the code was not redeemed for a refresh token: ${JSON.stringify(tokens)}`);
  return { access: tokens.access_token, refresh: tokens.refresh_token };
}

/**
 * A browser sign-in of `login` at the development IdP for `testClient`, its code redeemed: the
 * user agent (its cookies are the user's sessions) and the token answer; throws unless it is a 200.
 */
export async function signedIn(
  server: TestServer,
  testClient: TestClient,
  login: string,
  extra: Record<string, string> = {},
): Promise<{ agent: FetchUserAgent; tokens: Record<string, any> }> {
  const request = await authorizationRequest(server, testClient, extra);
  const agent = new FetchUserAgent();
  const loginPage = await agent.navigate(request.url, arrivingAt(testClient.redirectUri));
  const arrived = (await passDevIdpForms(agent, loginPage, login, arrivingAt(testClient.redirectUri))).url;
  const code = arrived.searchParams.get('code');
  if (!code) throw new Error(`the sign-in ended without a code: ${arrived.href}`);
  const { status, body } = await redeemCode(server, testClient, code, request.codeVerifier);
  if (status !== 200) throw new Error(`the code was not redeemed: ${status} ${JSON.stringify(body)}`);
  return { agent, tokens: body };
}

export interface SignInServer {
  server: TestServer;
  /** The default tenant's only identity provider: a sign-in without upstream_idp goes there. */
  idp: RegisteredDevIdp;
}

/**
 * The server shared by the files that sign users in through one development IdP and need
 * nothing else of the server: distinct from withServer()'s, whose default tenant collects the
 * identity providers other files register. Files keep their clients apart by naming them.
 */
export function withSignInServer(): Promise<SignInServer> {
  return sharedFixture('server with a development IdP', () => withDevIdp(readyServer()));
}

/** `server` with a development IdP registered; both closed together (the server alone if the IdP fails). */
async function withDevIdp<T extends TestServer>(
  starting: Promise<T>,
): Promise<{ server: T; idp: RegisteredDevIdp; close(): Promise<void> }> {
  const server = await starting;
  const idp = await startRegisteredDevIdp(server).catch(async (error) => {
    await server.close();
    throw error;
  });
  return {
    server,
    idp,
    async close() {
      await idp.close();
      await server.close();
    },
  };
}

/**
 * withSignInServer's twin as WORKERS=2 processes (test/support/server-process.ts): for the files
 * that run their tests against several worker processes on one store as well.
 */
export function withWorkersSignInServer(): Promise<SignInServer & { server: ProcessServer }> {
  // Kept-alive connections outlive a test's pauses: a connection pinned to a worker stays with it.
  return sharedFixture('WORKERS=2 server process with a development IdP', () =>
    withDevIdp(startProcessServer({ HTTP_KEEP_ALIVE_TIMEOUT_MS: '120000' })),
  );
}
