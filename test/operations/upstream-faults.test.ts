import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { DEV_IDP_CLIENT } from '../../src/dev-idp/index.js';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  redeemCode,
  registerIdentityProvider,
  registerPublicClient,
  type TestClient,
} from '../support/dev-idp.js';
import { freePort, readyServer, type TestServer } from '../support/server.js';

/** Short, so that the slow cases are quick; every upstream request is bounded by it. */
const OUTBOUND_TIMEOUT_MS = 1000;
/** What a failed sign-in may take beyond the timeout (a loaded 2-core machine included). */
const MARGIN_MS = 3000;

/**
 * A broken upstream identity provider ends the sign-in at the client's redirect_uri with a
 * standard error and the state, within OUTBOUND_TIMEOUT_MS plus a margin: down, slow, or
 * answering garbage, at discovery or at its token endpoint. The healthy path and the
 * upstream's own refusals are covered against the real dev IdP (test/oauth/login-*.test.ts);
 * what stands in here is a loopback server that misbehaves on purpose.
 */
describe('upstream identity provider faults', function () {
  const REDIRECT_URI = 'http://127.0.0.1:1/upstream-faults/callback';
  const atClient = arrivingAt(REDIRECT_URI);
  let server: TestServer;
  let upstream: FaultyIdp;
  let spa: TestClient;
  const logLines: string[] = [];

  before(async function () {
    // Its own server: the test reads the log lines the faults cause.
    server = await readyServer(
      { OUTBOUND_TIMEOUT_MS: String(OUTBOUND_TIMEOUT_MS), LOG_LEVEL: 'info' },
      { logStream: { write: (line: string) => void logLines.push(line) } },
    );
    upstream = await FaultyIdp.start(`${server.config.issuer}/idp/callback`);
    spa = await registerPublicClient(server, REDIRECT_URI);
  });

  after(async function () {
    await upstream?.close();
    await server?.close();
  });

  /** Registers `issuer` as an identity provider of its own and runs a sign-in through it, up to the client. */
  async function signInThrough(issuer: string) {
    const idpId = `faulty-${randomBytes(4).toString('hex')}`;
    // It sends every answer to the shared callback it was started with.
    await registerIdentityProvider(server, issuer, { idpId, fields: { sharedCallback: true } });
    const request = await authorizationRequest(server, spa, { upstream_idp: idpId });
    const started = Date.now();
    const page = await new FetchUserAgent().navigate(request.url, atClient);
    return { page, request, elapsedMs: Date.now() - started };
  }

  /** The sign-in ends at the client with `error` and the state, in time, and its audit entry says so. */
  async function expectClientError(issuer: string, error: string, options: { slow?: boolean } = {}) {
    const { page, request, elapsedMs } = await signInThrough(issuer);
    expect(atClient(page.url), `stopped at ${page.url.href} (${page.status}): ${page.body}`).to.equal(true);
    expect(Object.fromEntries(page.url.searchParams), "the client's error").to.include({ error, state: request.state });
    expect(page.url.searchParams.get('code')).to.equal(null);
    expect(elapsedMs, 'within the timeout plus a margin').to.be.below(OUTBOUND_TIMEOUT_MS + MARGIN_MS);
    if (options.slow)
      expect(elapsedMs, 'the timeout, not something else, ended it').to.be.at.least(OUTBOUND_TIMEOUT_MS - 100);
    // The resumption of the authorization request, which sent the client its error, is audited with it.
    const entries = (await server.admin('GET', '/audit-logs?size=10&sort=id,desc')).body.content as any[];
    const resumed = entries.find((entry) => entry.endpoint.startsWith('/authorize/'));
    expect(resumed, 'an audit entry of the resumed authorization request').to.include({
      clientId: spa.clientId,
      outcome: error === 'access_denied' ? 'deny' : 'error',
    });
    expect(resumed.requestSummary.error).to.equal(error);
  }

  describe('control', function () {
    it('the fake upstream, answering correctly, signs the user in (so the faults below are what fails)', async function () {
      const { page, request } = await signInThrough(upstream.issuer('healthy'));
      const code = page.url.searchParams.get('code');
      expect(code, page.url.href).to.be.a('string');
      expect((await redeemCode(server, spa, code!, request.codeVerifier)).status).to.equal(200);
    });
  });

  describe('down', function () {
    it('discovery refusing connections: temporarily_unavailable', async function () {
      await expectClientError(`http://127.0.0.1:${await freePort()}`, 'temporarily_unavailable');
    });

    it('a token endpoint refusing connections: temporarily_unavailable', async function () {
      await expectClientError(upstream.issuer('token-down'), 'temporarily_unavailable');
    });
  });

  describe('slow', function () {
    it('discovery slower than OUTBOUND_TIMEOUT_MS: temporarily_unavailable once it runs out', async function () {
      await expectClientError(upstream.issuer('discovery-slow'), 'temporarily_unavailable', { slow: true });
    });

    it('a token endpoint slower than OUTBOUND_TIMEOUT_MS: temporarily_unavailable once it runs out', async function () {
      await expectClientError(upstream.issuer('token-slow'), 'temporarily_unavailable', { slow: true });
    });

    it('a token endpoint that sends its headers, then stalls the body: temporarily_unavailable', async function () {
      await expectClientError(upstream.issuer('token-stall'), 'temporarily_unavailable', { slow: true });
    });
  });

  describe('garbage', function () {
    it('an HTML page for a discovery document: temporarily_unavailable', async function () {
      await expectClientError(upstream.issuer('discovery-html'), 'temporarily_unavailable');
    });

    it('a 500 from the token endpoint: temporarily_unavailable', async function () {
      await expectClientError(upstream.issuer('token-500'), 'temporarily_unavailable');
    });

    it('an HTML page from the token endpoint: server_error', async function () {
      await expectClientError(upstream.issuer('token-html'), 'server_error');
    });

    it('a token response that is not JSON: server_error', async function () {
      await expectClientError(upstream.issuer('token-not-json'), 'server_error');
    });

    it('a token response without id_token: access_denied', async function () {
      await expectClientError(upstream.issuer('token-no-id-token'), 'access_denied');
    });

    it('an id_token signed with a key the upstream does not publish: access_denied, and nobody signed in', async function () {
      await expectClientError(upstream.issuer('token-forged'), 'access_denied');
      const subjects = (await server.admin('GET', '/subjects')).body as { subjectId: string }[];
      expect(subjects.map((subject) => subject.subjectId)).not.to.include(FORGED_SUB);
    });
  });

  describe('afterwards', function () {
    it('logs each failure with its reason, and keeps no secret of the upstream exchange in the log or the audit log', async function () {
      const failures = logLines
        .map((line) => JSON.parse(line))
        .filter((line) => line.msg === 'upstream sign-in failed');
      expect(failures.length).to.be.at.least(10);
      for (const failure of failures) expect(failure).to.include.keys('error', 'reason', 'cause', 'requestId');
      const log = logLines.join('\n');
      const audit = JSON.stringify((await server.admin('GET', '/audit-logs?size=200')).body);
      for (const secret of [DEV_IDP_CLIENT.clientSecret, ...upstream.issuedSecrets]) {
        expect(log).not.to.include(secret);
        expect(audit).not.to.include(secret);
      }
    });
  });
});

type Fault =
  | 'healthy'
  | 'token-down'
  | 'discovery-slow'
  | 'token-slow'
  | 'token-stall'
  | 'discovery-html'
  | 'token-500'
  | 'token-html'
  | 'token-not-json'
  | 'token-no-id-token'
  | 'token-forged';

const FORGED_SUB = 'forged-subject';

/**
 * An OpenID provider that misbehaves as its issuer path says (`/<fault>`): it serves discovery,
 * an authorization endpoint that redirects straight back with a code, a token endpoint and a
 * JWKS, each broken where the fault says so. Requests it holds are let go when it closes.
 */
class FaultyIdp {
  /** Codes and tokens handed out, which must never appear in Arbiter's log. */
  readonly issuedSecrets: string[] = [];
  private readonly nonces = new Map<string, string>();
  private readonly held = new Set<ServerResponse>();

  private constructor(
    private readonly server: Server,
    private readonly base: string,
    private readonly callback: string,
    private readonly keys: { published: CryptoKey; publicJwk: Record<string, unknown>; forger: CryptoKey },
    private readonly closedPort: number,
  ) {
    server.on('request', (request, response) => void this.answer(request, response).catch(() => response.destroy()));
  }

  static async start(callback: string): Promise<FaultyIdp> {
    const published = await generateKeyPair('ES256');
    const forger = await generateKeyPair('ES256');
    const publicJwk = { ...(await exportJWK(published.publicKey)), kid: 'published', alg: 'ES256', use: 'sig' };
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return new FaultyIdp(
      server,
      base,
      callback,
      { published: published.privateKey, publicJwk, forger: forger.privateKey },
      await freePort(),
    );
  }

  issuer(fault: Fault): string {
    return `${this.base}/${fault}`;
  }

  async close(): Promise<void> {
    for (const response of this.held) response.destroy();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private async answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', this.base);
    const [, fault, ...rest] = url.pathname.split('/') as [string, Fault, ...string[]];
    const endpoint = rest.join('/');
    if (endpoint === '.well-known/openid-configuration') return this.discovery(fault, response);
    if (endpoint === 'authorize') return this.authorize(fault, url, response);
    if (endpoint === 'token') return this.token(fault, await bodyOf(request), response);
    if (endpoint === 'jwks') return json(response, 200, { keys: [this.keys.publicJwk] });
    json(response, 404, { error: 'not_found' });
  }

  private discovery(fault: Fault, response: ServerResponse): void {
    if (fault === 'discovery-slow') return this.hold(response);
    if (fault === 'discovery-html') return html(response, 200);
    const issuer = this.issuer(fault);
    json(response, 200, {
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: fault === 'token-down' ? `http://127.0.0.1:${this.closedPort}/token` : `${issuer}/token`,
      jwks_uri: `${issuer}/jwks`,
      response_types_supported: ['code'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['ES256'],
      token_endpoint_auth_methods_supported: ['client_secret_basic'],
    });
  }

  /**
   * Signs everybody in at once: back to Arbiter with a code and its `iss` (RFC 9207: at the shared
   * callback of a tenant of several providers, Arbiter takes no response without it), remembering
   * the nonce for the id_token.
   */
  private authorize(fault: Fault, url: URL, response: ServerResponse): void {
    const code = randomBytes(16).toString('base64url');
    this.issuedSecrets.push(code);
    this.nonces.set(code, url.searchParams.get('nonce') ?? '');
    const back = new URL(this.callback);
    back.searchParams.set('code', code);
    back.searchParams.set('state', url.searchParams.get('state') ?? '');
    back.searchParams.set('iss', this.issuer(fault));
    response.writeHead(302, { location: back.href }).end();
  }

  private async token(fault: Fault, form: URLSearchParams, response: ServerResponse): Promise<void> {
    if (fault === 'token-slow') return this.hold(response);
    if (fault === 'token-stall') {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"access_token":');
      return this.hold(response);
    }
    if (fault === 'token-500') return json(response, 500, { error: 'server_error' });
    if (fault === 'token-html') return html(response, 200);
    if (fault === 'token-not-json')
      return void response
        .writeHead(200, { 'content-type': 'application/json' })
        .end('access_token=abc&token_type=bearer');
    const accessToken = randomBytes(16).toString('base64url');
    this.issuedSecrets.push(accessToken);
    if (fault === 'token-no-id-token')
      return json(response, 200, { access_token: accessToken, token_type: 'Bearer', expires_in: 300 });
    const nonce = this.nonces.get(form.get('code') ?? '') ?? '';
    const key = fault === 'token-forged' ? this.keys.forger : this.keys.published;
    const idToken = await new SignJWT({ nonce })
      .setProtectedHeader({ alg: 'ES256', kid: 'published' })
      .setIssuer(this.issuer(fault))
      .setSubject(fault === 'token-forged' ? FORGED_SUB : `${fault}-subject`)
      .setAudience(DEV_IDP_CLIENT.clientId)
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(key);
    this.issuedSecrets.push(idToken);
    json(response, 200, { access_token: accessToken, token_type: 'Bearer', expires_in: 300, id_token: idToken });
  }

  /** Never answers (until the server closes): a request that would hang a caller without its own timeout. */
  private hold(response: ServerResponse): void {
    this.held.add(response);
    response.on('close', () => this.held.delete(response));
  }
}

async function bodyOf(request: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function json(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function html(response: ServerResponse, status: number): void {
  response
    .writeHead(status, { 'content-type': 'text/html' })
    .end('<!doctype html><html><body><h1>Service unavailable</h1><p>Please try again later.</p></body></html>');
}
