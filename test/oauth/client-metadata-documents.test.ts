import { expect } from 'chai';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as client from 'openid-client';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, startRegisteredDevIdp, type RegisteredDevIdp } from '../support/dev-idp.js';
import { eventually, postForm, updateOauthData } from '../support/oauth.js';
import { readyServer, withServer, type TestServer } from '../support/server.js';
import { MAX_DOCUMENT_FETCHES_AT_ONCE } from '../../src/oauth/register/cimd/index.js';

const REDIRECT_URI = 'http://127.0.0.1:1/cimd/callback';
const GRANTED = [{ type: 'urn:as:introspect', scopes: ['introspection'] }];

interface Served {
  body: unknown;
  headers?: Record<string, string>;
}

/** A loopback web server holding client metadata documents by path, counting requests per path. */
class DocumentServer {
  readonly documents = new Map<string, Served>();
  readonly fetches = new Map<string, number>();
  /** Paths whose answer waits for the promise: a host as slow as its owner likes. */
  readonly holds = new Map<string, Promise<void>>();
  /** Paths answered 503, as by a host that is down behind its proxy. */
  readonly down = new Set<string>();
  private constructor(
    private readonly server: Server,
    readonly base: string,
  ) {}

  static async start(): Promise<DocumentServer> {
    let self: DocumentServer | undefined;
    const answer = (path: string, response: ServerResponse) => {
      const served = self!.documents.get(path);
      if (self!.down.has(path)) {
        response.writeHead(503).end();
        return;
      }
      if (!served) {
        response.writeHead(404).end();
        return;
      }
      response
        .writeHead(200, { 'content-type': 'application/json', ...served.headers })
        .end(JSON.stringify(served.body));
    };
    const server = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://x').pathname;
      self!.fetches.set(path, (self!.fetches.get(path) ?? 0) + 1);
      void (self!.holds.get(path) ?? Promise.resolve()).then(() => answer(path, response));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new DocumentServer(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return self;
  }

  /** Serves a document at `path` naming itself (its URL) as client_id unless `body` says otherwise. */
  serve(
    path: string,
    body: Record<string, unknown> = {},
    headers: Record<string, string> = { 'cache-control': 'max-age=60' },
  ): string {
    const clientId = `${this.base}${path}`;
    this.documents.set(path, {
      body: {
        client_id: clientId,
        client_name: 'Metadata App',
        client_uri: 'https://app.example.test/',
        redirect_uris: [REDIRECT_URI],
        token_endpoint_auth_method: 'none',
        ...body,
      },
      headers,
    });
    return clientId;
  }

  count(path: string): number {
    return this.fetches.get(path) ?? 0;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe('Client ID metadata documents: a URL as client_id', function () {
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let documents: DocumentServer;

  before(async function () {
    documents = await DocumentServer.start();
    // Its own server: the test changes the shared policy data. A refusal is remembered 3 s (10 by
    // default): long beyond two requests in a row, short for the test that waits until it is forgotten.
    server = await readyServer({
      SERVICE_REGISTRATION_CIMD_ALLOW_INSECURE_LOCALHOST: 'true',
      SERVICE_REGISTRATION_CIMD_NEGATIVE_CACHE_SECONDS: '3',
    });
    idp = await startRegisteredDevIdp(server);
    await updateOauthData(server, (data) => {
      data.public_client_policy.cimd.granted_resources = GRANTED;
    });
  });
  after(async function () {
    await idp?.close();
    await server?.close();
    await documents?.close();
  });

  function authorizationQuery(
    clientId: string,
    redirectUri: string,
    challenge = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
  ): URLSearchParams {
    return new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: redirectUri,
      scope: 'openid profile',
      state: 'state-1',
      code_challenge: challenge,
      code_challenge_method: 'S256',
    });
  }

  /** Signs in through the dev IdP (or reuses the agent's session); returns the code and its verifier. */
  async function signIn(
    clientId: string,
    redirectUri = REDIRECT_URI,
    agent = new FetchUserAgent(),
  ): Promise<{ code: string; verifier: string }> {
    const verifier = client.randomPKCECodeVerifier();
    const query = authorizationQuery(clientId, redirectUri, await client.calculatePKCECodeChallenge(verifier));
    const first = await agent.navigate(`${server.config.issuer}/authorize?${query}`, arrivingAt(redirectUri));
    const page = first.url.href.startsWith(redirectUri)
      ? first
      : await passDevIdpForms(agent, first, 'erin', arrivingAt(redirectUri));
    const code = page.url.searchParams.get('code');
    if (!code) throw new Error(`no code: ${page.url.href} ${page.status} ${page.body?.slice(0, 500)}`);
    return { code, verifier };
  }

  /** The token request of a document client for its code (PKCE, as a public client). */
  const redeem = (clientId: string, code: string, verifier: string, redirectUri = REDIRECT_URI) =>
    postForm(server, '/token', {
      grant_type: 'authorization_code',
      code,
      redirect_uri: redirectUri,
      client_id: clientId,
      code_verifier: verifier,
    });

  /** The first answer of /authorize to a request that must be refused: never a 500, never a redirect to the client. */
  async function refused(
    target: TestServer,
    clientId: string,
    redirectUri = REDIRECT_URI,
  ): Promise<{ status: number; error: string }> {
    const response = await target.request(`/authorize?${authorizationQuery(clientId, redirectUri)}`, {
      headers: { accept: 'application/json' },
    });
    const text = await response.text();
    expect(response.status, text).to.equal(400);
    expect(response.headers.get('location'), 'not sent back to the client').to.equal(null);
    // The browser route answers with an error page (or JSON, as content negotiation goes).
    return {
      status: response.status,
      error: (/"error":"([^"]+)"/.exec(text) ?? /<dt>Error<\/dt><dd><code>([a-z_]+)<\/code>/.exec(text))?.[1] ?? text,
    };
  }

  it('signs in with a metadata document URL as client_id and redeems the code as a public client with PKCE', async function () {
    const clientId = documents.serve('/clients/app.json');
    const { code, verifier } = await signIn(clientId);
    const { status, body } = await redeem(clientId, code, verifier, REDIRECT_URI);
    expect(status, JSON.stringify(body)).to.equal(200);
    expect(body).to.include.keys('access_token', 'id_token', 'refresh_token');
    expect(body.scope.split(' ')).to.include('openid');
  });

  it('holds a document client that says dpop_bound_access_tokens to DPoP at /token (RFC 9449 §5.2), and refuses a non-boolean', async function () {
    const clientId = documents.serve('/clients/dpop-bound.json', { dpop_bound_access_tokens: true });
    const { code, verifier } = await signIn(clientId);
    const shown = (await server.admin('GET', `/clients/${encodeURIComponent(clientId)}`)).body;
    expect(shown.dpopBoundAccessTokens).to.equal(true);
    // Was: a Bearer access token and an unbound refresh token.
    const { status, body } = await redeem(clientId, code, verifier);
    expect(status, JSON.stringify(body)).to.equal(400);
    expect(body).to.include({ error: 'invalid_dpop_proof', error_description: 'DPoP proof JWT not provided' });
    const vague = documents.serve('/clients/dpop-vague.json', { dpop_bound_access_tokens: 'yes' });
    expect((await refused(server, vague)).error).to.equal('invalid_client');
  });

  // Issue 27, item 5: unauthenticated document URLs left permanent records, refused documents included.
  it('stores no client for a document whose redirect URIs /authorize would refuse', async function () {
    for (const [path, uri] of [
      ['/clients/js.json', 'javascript:alert(1)'],
      ['/clients/native.json', 'com.evil:/cb'],
      ['/clients/plain.json', 'http://evil.example/cb'],
    ] as const) {
      const clientId = documents.serve(path, { redirect_uris: [uri] });
      await refused(server, clientId, uri);
      expect(await server.store.collection('clients', '_default').findOne({ clientId }), uri).to.equal(null);
    }
  });

  it('keeps a client record as an expiring cache entry (CIMD_RECORD_TTL), never a permanent client', async function () {
    const clientId = documents.serve('/clients/expiring.json');
    await signIn(clientId);
    const record = (await server.store.collection('clients', '_default').findOne({ clientId })) as {
      expiresAt?: number;
    } | null;
    expect(record?.expiresAt, 'an expiry').to.be.a('number');
    expect(record!.expiresAt! - Date.now()).to.be.within(23 * 3_600_000, 24 * 3_600_000);
  });

  it('drops a display field the catalog schema refuses, so that the Admin API can write back what it shows', async function () {
    const clientId = documents.serve('/clients/upper-case.json', { logo_uri: 'HTTPS://cdn.example.test/logo.png' });
    await signIn(clientId);
    const path = `/clients/${encodeURIComponent(clientId)}`;
    const shown = (await server.admin('GET', path)).body;
    expect(shown.clientUri, 'a usable one is kept').to.equal('https://app.example.test/');
    expect(shown, 'the logo URI the schema refuses').to.not.have.property('logoUri');
    const { id: _id, createdAt: _created, updatedAt: _updated, ...body } = shown;
    const replaced = await server.admin('PUT', path, body);
    expect(replaced.status, JSON.stringify(replaced.body)).to.equal(200);
  });

  it('creates a public client with registrationType cimd that the Admin API lists', async function () {
    const clientId = documents.serve('/clients/app.json');
    const listed = (await server.admin('GET', '/clients')).body as any[];
    const record = (Array.isArray(listed) ? listed : (listed as any).content).find(
      (entry: any) => entry.clientId === clientId,
    );
    expect(record, 'listed').to.exist;
    expect(record).to.include({
      clientType: 'public',
      registrationType: 'cimd',
      tokenEndpointAuthMethod: 'none',
      clientName: 'Metadata App',
      clientUri: 'https://app.example.test/',
      enabled: true,
      tenantId: null,
    });
    expect(record.redirectUris).to.deep.equal([REDIRECT_URI]);
    expect((await server.admin('GET', `/clients/${encodeURIComponent(clientId)}`)).body.registrationType).to.equal(
      'cimd',
    );
  });

  it('gives the client the synthetic granted resources of policy data, seen by the authorize decision', async function () {
    const clientId = documents.serve('/clients/app.json');
    const entries = (await server.admin('GET', '/audit-logs?size=200&sort=id,desc')).body.content as any[];
    const decision = entries.find(
      (entry) => entry.endpoint.startsWith('/authorize') && entry.policyInput?.client?.client_id === clientId,
    );
    expect(decision, 'an authorize decision about the client').to.exist;
    expect(decision.policyInput.client).to.deep.include({
      client_type: 'public',
      registration_type: 'cimd',
      token_endpoint_auth_method: 'none',
      granted_resources: GRANTED,
    });
    expect(decision.policyInput.client.redirect_uris).to.deep.equal([REDIRECT_URI]);
  });

  it('creates the client in the tenant of the request only', async function () {
    await server.admin('POST', '/subjects', { subjectId: 'makes-tenant-cimd-exist', tenantId: 'tenant-cimd' });
    const clientId = documents.serve('/clients/tenant.json');
    const response = await server.request(`/authorize?${authorizationQuery(clientId, REDIRECT_URI)}`, {
      tenant: 'tenant-cimd',
    });
    expect(response.status, await response.text()).to.be.within(300, 399);
    const inTenant = await server.admin('GET', `/clients/${encodeURIComponent(clientId)}?tenantId=tenant-cimd`);
    expect(inTenant.status).to.equal(200);
    expect(inTenant.body).to.include({ registrationType: 'cimd', tenantId: 'tenant-cimd' });
    expect(
      (await server.admin('GET', `/clients/${encodeURIComponent(clientId)}`)).status,
      'not in the default tenant',
    ).to.equal(404);
  });

  it('a client an operator disabled through the Admin API does not exist, although its document is served', async function () {
    const clientId = documents.serve('/clients/disabled.json');
    await signIn(clientId);
    const fields = (await server.admin('GET', `/clients/${encodeURIComponent(clientId)}`)).body;
    for (const readOnly of ['id', 'createdAt', 'updatedAt', 'tenantId']) delete fields[readOnly];
    expect(
      (await server.admin('PUT', `/clients/${encodeURIComponent(clientId)}`, { ...fields, enabled: false })).status,
    ).to.equal(200);
    expect((await refused(server, clientId)).error).to.equal('invalid_client');
  });

  describe('each rule refused when broken (never a 500)', function () {
    it('refuses a document whose client_id is not its URL', async function () {
      const clientId = documents.serve('/clients/mismatch.json', { client_id: `${documents.base}/clients/app.json` });
      expect((await refused(server, clientId)).error).to.equal('invalid_client');
      expect(documents.count('/clients/mismatch.json'), 'it was fetched and refused').to.equal(1);
    });

    it('refuses a redirect URI the document does not list (exact match)', async function () {
      const clientId = documents.serve('/clients/app.json');
      expect((await refused(server, clientId, 'http://127.0.0.1:1/elsewhere')).error).to.equal('invalid_redirect_uri');
      expect((await refused(server, clientId, `${REDIRECT_URI}/`)).error).to.equal('invalid_redirect_uri');
      expect((await refused(server, clientId, `${REDIRECT_URI}?x=1`)).error).to.equal('invalid_redirect_uri');
    });

    it('refuses a URL without a path, with a fragment, with credentials or with dot segments, without fetching it', async function () {
      documents.serve('/');
      const dotted = documents.serve('/clients/dot.json');
      const before = new Map(documents.fetches);
      for (const clientId of [
        documents.base,
        `${documents.base}/`,
        `${documents.base}/clients/app.json#fragment`,
        `${documents.base}/clients/app.json#`,
        `http://user:pass@127.0.0.1:${new URL(documents.base).port}/clients/app.json`,
        `${documents.base}/clients/x/../dot.json`,
        `${documents.base}/clients/./dot.json`,
        `${documents.base}/clients/x/%2E%2e/dot.json`,
        `${documents.base}/clients/%2e/dot.json`,
      ]) {
        expect((await refused(server, clientId)).error, clientId).to.equal('invalid_client');
      }
      expect(documents.fetches, 'no document was fetched').to.deep.equal(before);
      expect(dotted).to.equal(`${documents.base}/clients/dot.json`);
    });

    it('refuses a private address without connecting', async function () {
      const started = Date.now();
      expect((await refused(server, 'https://10.0.0.1/c.json')).error).to.equal('invalid_client');
      expect((await refused(server, 'https://169.254.169.254/latest/meta-data.json')).error).to.equal('invalid_client');
      expect(Date.now() - started, 'refused before any connection attempt (the outbound timeout is 5 s)').to.be.below(
        2000,
      );
    });

    it('refuses a document that is missing, not JSON, or asks for a client secret', async function () {
      expect((await refused(server, `${documents.base}/clients/missing.json`)).error).to.equal('invalid_client');
      const secretive = documents.serve('/clients/confidential.json', {
        token_endpoint_auth_method: 'client_secret_basic',
      });
      expect((await refused(server, secretive)).error).to.equal('invalid_client');
      const noRedirects = documents.serve('/clients/no-redirects.json', { redirect_uris: [] });
      expect((await refused(server, noRedirects)).error).to.equal('invalid_client');
    });

    it('refuses an unknown URL client at the token endpoint with 401 invalid_client', async function () {
      const { status, body } = await redeem(`${documents.base}/clients/missing-too.json`, 'x', 'x'.repeat(43));
      expect(status).to.equal(401);
      expect(body.error).to.equal('invalid_client');
    });

    it('refuses http://127.0.0.1 without SERVICE_REGISTRATION_CIMD_ALLOW_INSECURE_LOCALHOST, without fetching', async function () {
      const strict = await withServer();
      const clientId = documents.serve('/clients/strict.json');
      expect((await refused(strict, clientId)).error).to.equal('invalid_client');
      expect(
        (await refused(strict, `http://localhost:${new URL(documents.base).port}/clients/strict.json`)).error,
      ).to.equal('invalid_client');
      expect(documents.count('/clients/strict.json')).to.equal(0);
      const listed = (await strict.admin('GET', '/clients')).body;
      expect(JSON.stringify(listed)).not.to.contain('strict.json');
    });
  });

  describe('caching as the HTTP headers allow', function () {
    it('max-age=60: one fetch for two authorizations and the token request', async function () {
      const clientId = documents.serve('/clients/cached.json', {}, { 'cache-control': 'public, max-age=60' });
      const agent = new FetchUserAgent();
      const first = await signIn(clientId, REDIRECT_URI, agent);
      await signIn(clientId, REDIRECT_URI, agent);
      const { status } = await redeem(clientId, first.code, first.verifier);
      expect(status).to.equal(200);
      expect(documents.count('/clients/cached.json')).to.equal(1);
    });

    it('no-store: fetched again for each authorization; a changed document takes effect and updates the stored client', async function () {
      const path = '/clients/fresh.json';
      const clientId = documents.serve(path, {}, { 'cache-control': 'no-store' });
      const agent = new FetchUserAgent();
      await signIn(clientId, REDIRECT_URI, agent);
      const afterFirst = documents.count(path);
      expect(afterFirst).to.be.at.least(1);
      await signIn(clientId, REDIRECT_URI, agent);
      const afterSecond = documents.count(path);
      expect(afterSecond).to.be.above(afterFirst);

      const moved = 'http://127.0.0.1:1/cimd/moved';
      documents.serve(path, { redirect_uris: [moved], client_name: 'Renamed App' }, { 'cache-control': 'no-store' });
      const { code, verifier } = await signIn(clientId, moved, agent);
      const { status } = await redeem(clientId, code, verifier, moved);
      expect(status).to.equal(200);
      expect((await refused(server, clientId, REDIRECT_URI)).error, 'the old URI is gone').to.equal(
        'invalid_redirect_uri',
      );
      const record = (await server.admin('GET', `/clients/${encodeURIComponent(clientId)}`)).body;
      expect(record.redirectUris).to.deep.equal([moved]);
      expect(record.clientName).to.equal('Renamed App');
    });

    it("never undoes an operator's disable made while the document was on its way (found 2026-11-30: the record read before the fetch was written back)", async function () {
      const path = '/clients/slow.json';
      const clientId = documents.serve(path, {}, { 'cache-control': 'no-store' });
      await signIn(clientId);
      documents.serve(path, { client_name: 'Slow App, renamed' }, { 'cache-control': 'no-store' });
      let release = () => {};
      documents.holds.set(path, new Promise<void>((resolve) => (release = resolve)));
      const fetchesBefore = documents.count(path);
      const asked = server.request(`/authorize?${authorizationQuery(clientId, REDIRECT_URI)}`, {
        headers: { accept: 'application/json' },
        redirect: 'manual',
      });
      await eventually(async () => documents.count(path) > fetchesBefore, 10_000, 20);
      const record = `/clients/${encodeURIComponent(clientId)}`;
      const { id: _id, createdAt: _created, updatedAt: _updated, ...fields } = (await server.admin('GET', record)).body;
      const disabled = await server.admin('PUT', record, { ...fields, enabled: false });
      expect(disabled.status, JSON.stringify(disabled.body)).to.equal(200);
      release();
      documents.holds.delete(path);
      const answer = await asked;
      expect(answer.status, 'a disabled client names no client').to.equal(400);
      // Was: enabled again by the document's fetch.
      expect((await server.admin('GET', record)).body).to.include({ enabled: false, clientName: 'Slow App, renamed' });
    });

    // Found 2026-11-29: a stored client got 401 invalid_client while its document's host was down.
    it("goes on with a stored client while its document's host cannot answer; a client never stored is still refused", async function () {
      const path = '/clients/host-down.json';
      const clientId = documents.serve(path, {}, { 'cache-control': 'no-store' });
      const { code, verifier } = await signIn(clientId);
      documents.down.add(path);
      try {
        const { status, body } = await redeem(clientId, code, verifier, REDIRECT_URI);
        expect(status, JSON.stringify(body)).to.equal(200);
        expect(documents.count(path), 'it was asked').to.be.at.least(2);
        const never = documents.serve('/clients/never-stored.json');
        documents.down.add('/clients/never-stored.json');
        expect((await refused(server, never)).error).to.equal('invalid_client');
      } finally {
        documents.down.clear();
      }
    });

    it('Expires in the past: not cached', async function () {
      const path = '/clients/expired.json';
      const clientId = documents.serve(path, {}, { expires: 'Thu, 01 Jan 1970 00:00:00 GMT' });
      await signIn(clientId);
      const once = documents.count(path);
      await signIn(clientId);
      expect(documents.count(path)).to.be.above(once);
    });

    it('a refused document is remembered only briefly (negative cache), then fetched again', async function () {
      const path = '/clients/later.json';
      const clientId = `${documents.base}${path}`;
      expect((await refused(server, clientId)).error).to.equal('invalid_client');
      expect((await refused(server, clientId)).error).to.equal('invalid_client');
      expect(documents.count(path), 'the 404 is remembered').to.equal(1);
      documents.serve(path);
      this.timeout(30_000);
      // Once the refusal has expired, the document is fetched again and the request goes on to sign-in.
      await eventually(async () => {
        const response = await server.request(`/authorize?${authorizationQuery(clientId, REDIRECT_URI)}`);
        return (
          response.status >= 300 && response.status < 400 && !response.headers.get('location')?.startsWith(REDIRECT_URI)
        );
      }, 20_000);
      expect(documents.count(path)).to.equal(2);
    });
  });

  describe('bounded: anyone can name a document, so what one makes Arbiter keep has a limit', function () {
    let bounded: TestServer;
    const documentClients = async () =>
      bounded.store.collection('clients', '_default').count({ registrationType: 'cimd' });

    const logLines: string[] = [];

    before(async function () {
      bounded = await readyServer(
        {
          SERVICE_REGISTRATION_CIMD_ALLOW_INSECURE_LOCALHOST: 'true',
          SERVICE_REGISTRATION_CIMD_MAX_DOCUMENT_BYTES: '1024',
          SERVICE_REGISTRATION_CIMD_MAX_CLIENTS: '2',
          LOG_LEVEL: 'info',
        },
        { logStream: { write: (line: string) => void logLines.push(line) } },
      );
    });
    after(async function () {
      await bounded?.close();
    });

    // Found 2026-11-30: such a client_id was looked up, kept whole in the documents' negative cache
    // and logged whole (a 1 MB log line and 1 MB held per request, for anyone).
    it('refuses a client_id URL longer than any client may have as an unknown client, logging no more than a line', async function () {
      const huge = (length: number) => `https://app.example/${'a'.repeat(length)}`;
      logLines.length = 0;
      const token = await bounded.request('/token', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', client_id: huge(200_000) }).toString(),
      });
      expect(token.status).to.equal(401);
      expect(((await token.json()) as { error: string }).error).to.equal('invalid_client');
      // A GET /authorize is bounded by the request line (16 KB).
      expect((await refused(bounded, huge(12_000))).error).to.equal('invalid_client');
      const longest = Math.max(0, ...logLines.map((line) => line.length));
      expect(longest, 'the longest log line').to.be.below(8192);
    });

    // Found 2026-11-30: nothing bounded the fetches under way, so a slow host held as many
    // connections out as callers named documents on it.
    it(`fetches at most ${MAX_DOCUMENT_FETCHES_AT_ONCE} documents at once; a new one beyond is 503 at once`, async function () {
      const held: ServerResponse[] = [];
      const slow = createServer((request, response) => {
        request.resume();
        held.push(response);
      });
      await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
      const base = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
      try {
        const count = MAX_DOCUMENT_FETCHES_AT_ONCE + 8;
        let answered = 0;
        const answers = Array.from({ length: count }, (_, n) =>
          bounded
            .request(`/authorize?${authorizationQuery(`${base}/held/${n}.json`, REDIRECT_URI)}`, {
              headers: { accept: 'application/json' },
            })
            .then(async (response) => {
              const answer = { status: response.status, text: await response.text() };
              answered += 1;
              return answer;
            }),
        );
        // The 8 beyond the bound are answered while the others' fetches are still held.
        await eventually(async () => held.length >= MAX_DOCUMENT_FETCHES_AT_ONCE && answered >= 8);
        expect(held.length, 'fetches under way').to.equal(MAX_DOCUMENT_FETCHES_AT_ONCE);
        for (const response of held) response.writeHead(404).end();
        const statuses = (await Promise.all(answers)).map((answer) => answer.status);
        expect(
          statuses.filter((status) => status === 503),
          statuses.join(' '),
        ).to.have.length(8);
      } finally {
        for (const response of held) if (!response.writableEnded) response.writeHead(404).end();
        slow.closeAllConnections();
        await new Promise((resolve) => slow.close(resolve));
      }
    });

    it('refuses a document larger than SERVICE_REGISTRATION_CIMD_MAX_DOCUMENT_BYTES, storing nothing', async function () {
      const long = (n: number) => `https://app.example/${'x'.repeat(200)}/${n}`;
      const large = documents.serve('/limits/large.json', {
        redirect_uris: [REDIRECT_URI, ...Array.from({ length: 10 }, (_, n) => long(n))],
      });
      expect((await refused(bounded, large)).error).to.equal('invalid_client');
      expect(await documentClients()).to.equal(0);
    });

    it('keeps at most SERVICE_REGISTRATION_CIMD_MAX_CLIENTS document clients, refusing a new one beyond while the kept ones work', async function () {
      const goesToSignIn = async (clientId: string) => {
        const response = await bounded.request(`/authorize?${authorizationQuery(clientId, REDIRECT_URI)}`);
        await response.body?.cancel();
        return (
          response.status >= 300 && response.status < 400 && !response.headers.get('location')?.startsWith(REDIRECT_URI)
        );
      };
      const [first, second, third] = [1, 2, 3].map((n) => documents.serve(`/limits/client-${n}.json`));
      expect(await goesToSignIn(first!)).to.equal(true);
      expect(await goesToSignIn(second!)).to.equal(true);
      expect((await refused(bounded, third!)).error).to.equal('invalid_client');
      expect(await documentClients()).to.equal(2);
      expect(await goesToSignIn(first!), 'a kept client still signs in').to.equal(true);
    });
  });
});
