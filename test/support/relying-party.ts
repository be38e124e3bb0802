import bcrypt from 'bcryptjs';
import * as client from 'openid-client';
import { FetchUserAgent, type Page } from './browser.js';
import type { RegisteredDevIdp } from './dev-idp.js';
import type { TestServer } from './server.js';

/**
 * The relying party of the conformance walk: what the OpenID Foundation's suite plays against
 * an OP, played with openid-client against Arbiter (which signs people in at the development
 * IdP). A static client, registered through the Admin API as the suite's `static_client`
 * variant expects, confidential, with client_secret_basic unless told otherwise.
 */

/** Never requested: the user agent stops before it, as the suite's callback receives what arrives there. */
export const CALLBACK = 'http://127.0.0.1:1/conformance/callback';

export interface ConformanceClient {
  clientId: string;
  secret: string;
  configuration: client.Configuration;
}

export async function conformanceClient(
  server: TestServer,
  clientId: string,
  authMethod: 'client_secret_basic' | 'client_secret_post' = 'client_secret_basic',
  /** More of the client record (a logout plan's post-logout and back-channel logout URIs). */
  fields: Record<string, unknown> = {},
): Promise<ConformanceClient> {
  const secret = `${clientId}-secret-value`;
  const created = await server.admin('POST', '/clients', {
    clientId,
    clientType: 'confidential',
    clientSecret: bcrypt.hashSync(secret, 4),
    tokenEndpointAuthMethod: authMethod,
    redirectUris: [CALLBACK],
    scopes: ['openid', 'profile', 'email'],
    grantTypes: ['authorization_code', 'refresh_token'],
    ...fields,
  });
  if (created.status !== 201) throw new Error(`client ${clientId} not created: ${JSON.stringify(created.body)}`);
  const authentication =
    authMethod === 'client_secret_post' ? client.ClientSecretPost(secret) : client.ClientSecretBasic(secret);
  const configuration = await client.discovery(new URL(server.config.issuer), clientId, undefined, authentication, {
    // The test server is plain HTTP on loopback; ID token signatures are checked against the JWKS.
    execute: [client.allowInsecureRequests, client.enableNonRepudiationChecks],
  });
  return { clientId, secret, configuration };
}

/** What one authorization request came to. */
export interface Authorization {
  /** The authorization response at the redirect_uri (query), or a form_post's form as a POST request. */
  response?: URL | Request;
  /** The page the user agent stopped at when the request never reached the redirect_uri (an error page). */
  page: Page;
  state: string;
  nonce?: string;
  /** The authorization requests Arbiter sent the user agent to at the upstream IdP. */
  upstreamRequests: URL[];
  /** Whether the upstream IdP showed its login form (a fresh sign-in). */
  loginFormShown: boolean;
}

/**
 * One person's user agent: a cookie jar that keeps the Arbiter and upstream sessions between its
 * authorization requests, and that signs `login` in at the dev IdP's forms when they appear.
 */
export class Browser {
  readonly agent = new FetchUserAgent();

  constructor(
    private readonly idp: RegisteredDevIdp,
    public login = 'alice',
    /** Sent with every authorization request of this user agent (a plan's `response_mode=form_post`). */
    private readonly always: Record<string, string> = {},
  ) {}

  /** A GET authorization request of `rp` with state and nonce (`nonce: ''` leaves it out) and `parameters`. */
  async authorize(rp: ConformanceClient, parameters: Record<string, string> = {}): Promise<Authorization> {
    const { state, nonce, query } = requestParameters({ ...this.always, ...parameters });
    const url = client.buildAuthorizationUrl(rp.configuration, query);
    return this.follow(state, nonce, () => this.agent.navigate(url, arrivingAtCallback));
  }

  /**
   * An authorization request of exactly `query` (nothing added): the suite's request-object
   * modules send state and nonce inside the object only.
   */
  async authorizeExactly(rp: ConformanceClient, query: Record<string, string>): Promise<Authorization> {
    const url = new URL(rp.configuration.serverMetadata().authorization_endpoint!);
    for (const [name, value] of Object.entries({ ...this.always, ...query })) url.searchParams.set(name, value);
    return this.follow(query.state ?? '', query.nonce, () => this.agent.navigate(url, arrivingAtCallback));
  }

  /**
   * The same authorization request as a form POST to the authorization endpoint (OIDC Core
   * §3.1.2.1). The user agent submits hidden fields as they are written: plain values only.
   */
  async authorizeByPost(rp: ConformanceClient, parameters: Record<string, string> = {}): Promise<Authorization> {
    const { state, nonce, query } = requestParameters({ ...this.always, ...parameters });
    const endpoint = rp.configuration.serverMetadata().authorization_endpoint!;
    const form = {
      url: new URL(endpoint),
      body: `<form method="post" action="${endpoint}">${Object.entries({ client_id: rp.clientId, ...query })
        .map(([name, value]) => `<input type="hidden" name="${name}" value="${value}"/>`)
        .join('')}</form>`,
    };
    return this.follow(state, nonce, () => this.agent.submitForm(form, {}, arrivingAtCallback));
  }

  private async follow(state: string, nonce: string | undefined, start: () => Promise<Page>): Promise<Authorization> {
    const visitedBefore = this.agent.visited.length;
    let page = await start();
    let loginFormShown = false;
    for (;;) {
      if (page.url.host === this.idp.host && page.body?.includes('<form')) {
        const login = page.body.includes('name="login"');
        loginFormShown ||= login;
        const fields: Record<string, string> = login ? { login: this.login, password: 'any password' } : {};
        page = await this.agent.submitForm(page, fields, arrivingAtCallback);
      } else if (autoSubmitted(page) && !responseAt(page)) {
        // A page that posts itself on (oidc-provider's logout of another person's session), as a browser's script does.
        page = await this.agent.submitForm(page, {}, arrivingAtCallback);
      } else {
        break;
      }
    }
    const upstreamRequests = this.agent.visited
      .slice(visitedBefore)
      .filter((url) => url.host === this.idp.host && url.pathname === '/auth');
    return { response: responseAt(page), page, state, nonce, upstreamRequests, loginFormShown };
  }
}

function requestParameters(parameters: Record<string, string>) {
  const state = parameters.state ?? client.randomState();
  const nonce = parameters.nonce === '' ? undefined : (parameters.nonce ?? client.randomNonce());
  const query: Record<string, string> = {
    redirect_uri: CALLBACK,
    scope: 'openid',
    state,
    ...(nonce ? { nonce } : {}),
    ...Object.fromEntries(Object.entries(parameters).filter(([name]) => name !== 'nonce')),
  };
  return { state, nonce, query };
}

const arrivingAtCallback = (url: URL) => url.href.startsWith(CALLBACK);

const autoSubmitted = (page: Page) => (page.body ?? '').includes('document.forms[0].submit()');

/** The authorization response: a redirect to the callback, or a form_post page's form (OAuth 2.0 Form Post Response Mode). */
function responseAt(page: Page): URL | Request | undefined {
  if (page.url.href.startsWith(CALLBACK)) return page.url;
  const form = /<form method="post" action="([^"]+)">([\s\S]*?)<\/form>/.exec(page.body ?? '');
  if (!form || !unescape(form[1]!).startsWith(CALLBACK)) return undefined;
  const fields = [...form[2]!.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"\s*\/?>/g)].map(
    ([, name, value]): [string, string] => [unescape(name!), unescape(value!)],
  );
  return new Request(unescape(form[1]!), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
}

/** Redeems the code of an authorization with openid-client, which checks state, iss, nonce and the ID token. */
export function redeem(
  rp: ConformanceClient,
  authorization: Authorization,
  checks: { pkceCodeVerifier?: string; maxAge?: number } = {},
): Promise<client.TokenEndpointResponse & client.TokenEndpointResponseHelpers> {
  if (!authorization.response)
    throw new Error(`no authorization response; stopped at ${authorization.page.url.href}: ${authorization.page.body}`);
  // A form post's body can be read once: openid-client reads a copy, responseParameters the original.
  const { response } = authorization;
  return client.authorizationCodeGrant(rp.configuration, response instanceof Request ? response.clone() : response, {
    expectedState: authorization.state,
    expectedNonce: authorization.nonce,
    idTokenExpected: true,
    ...checks,
  });
}

/** The authorization response's parameters (an error, or a code). */
export async function responseParameters(authorization: Authorization): Promise<URLSearchParams> {
  const { response } = authorization;
  if (!response) throw new Error(`no authorization response; stopped at ${authorization.page.url.href}`);
  return response instanceof URL ? response.searchParams : new URLSearchParams(await response.clone().text());
}

/** Waits until the clock shows `epochMs` (a module that is about time, such as code reuse after 30 seconds). */
export async function clockReaches(epochMs: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < epochMs) {
    if (Date.now() > deadline) throw new Error('the clock did not move on in time');
    await new Promise((resolve) => setTimeout(resolve, Math.min(250, epochMs - Date.now())));
  }
}

/** Waits until the clock's second has moved past `epochSeconds` + `seconds` (auth_time comparisons are in whole seconds). */
export async function secondsPassedSince(epochSeconds: number, seconds: number, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Math.floor(Date.now() / 1000) <= epochSeconds + seconds) {
    if (Date.now() > deadline) throw new Error('the clock did not move on in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function unescape(value: string): string {
  return value
    .replace(/&#(\d+);/g, (_, code: string) => String.fromCharCode(Number(code)))
    .replace(/&#x([0-9a-f]+);/gi, (_, code: string) => String.fromCharCode(parseInt(code, 16)))
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}
