import { expect } from 'chai';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, authorizationRequest, passDevIdpForms, redeemCode, type TestClient } from '../support/dev-idp.js';
import type { TestServer } from '../support/server.js';

// The bench scripts (bench/authzen.ts, bench/uma-rpt.ts) take it from here.
export { clientToken } from '../support/oauth.js';

export const UMA_GRANT = 'urn:ietf:params:oauth:grant-type:uma-ticket';
export const ACCESS_TOKEN_FORMAT = 'urn:ietf:params:oauth:token-type:access_token';
export const PHOTO_TYPE = 'https://photos.example.test/photo';

export interface JsonAnswer {
  status: number;
  body: any;
  headers: Headers;
}

/** A JSON call to one of Arbiter's Bearer-protected APIs. */
export async function api(
  server: TestServer,
  method: string,
  path: string,
  token: string | null,
  json?: unknown,
  headers: Record<string, string> = {},
): Promise<JsonAnswer> {
  const response = await server.request(path, {
    method,
    headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...headers },
    ...(json !== undefined ? { json } : {}),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

/** A public client whose users may grant it the UMA protection and delegation scopes. */
export async function umaPublicClient(server: TestServer, clientId: string, redirectUri: string): Promise<TestClient> {
  const { status, body } = await server.admin('POST', '/clients', {
    clientId,
    clientType: 'public',
    tokenEndpointAuthMethod: 'none',
    redirectUris: [redirectUri],
    scopes: ['openid', 'profile', 'email', 'uma_protection', 'delegation_management'],
  });
  if (status !== 201) throw new Error(`client not created: ${JSON.stringify(body)}`);
  return { clientId, redirectUri };
}

/**
 * `login` signs in at the dev IdP through `testClient`; returns the access token issued for `extra` (scope, resource).
 * `tokenHeaders` adds headers to the code redemption (a DPoP proof, made when it is sent).
 */
export async function userToken(
  server: TestServer,
  testClient: TestClient,
  login: string,
  extra: Record<string, string>,
  tokenHeaders: () => Promise<Record<string, string>> = async () => ({}),
): Promise<string> {
  const request = await authorizationRequest(server, testClient, extra);
  const agent = new FetchUserAgent();
  const loginPage = await agent.navigate(request.url, arrivingAt(testClient.redirectUri));
  const code = (
    await passDevIdpForms(agent, loginPage, login, arrivingAt(testClient.redirectUri))
  ).url.searchParams.get('code');
  expect(code, `no code for ${login}`).to.be.a('string');
  const { status, body } = await redeemCode(server, testClient, code!, request.codeVerifier, await tokenHeaders());
  expect(status, JSON.stringify(body)).to.equal(200);
  return body.access_token;
}
