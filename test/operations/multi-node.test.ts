import { expect } from 'chai';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  registerPublicClient,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import {
  basic,
  clientCredentials,
  confidentialClient,
  eventually,
  FORM,
  postForm,
  updateOauthData,
} from '../support/oauth.js';
import { rawRequest } from '../support/raw-http.js';
import { readyServer, type TestServer } from '../support/server.js';
import { sharedPostgresTestServer, type PostgresTestServer } from '../store/postgres-server.js';

/** AUTH_FAILURE_LIMIT of both nodes. */
const FAILURE_LIMIT = 6;

/** Codes raced for, one after another: one race can come out right by luck, ten rarely do. */
const RACE_ROUNDS = 10;

/**
 * Two Arbiter nodes (each with its own managed OPA) on one PostgreSQL store, sharing one issuer
 * as nodes behind a load balancer do: a throwaway cluster of Debian's PostgreSQL (or the server
 * POSTGRES_URL names), reached directly, with no proxy in between.
 */
describe('two nodes on one PostgreSQL store', function () {
  let a: TestServer;
  let b: TestServer;
  let idp: RegisteredDevIdp;
  let postgres: PostgresTestServer;

  before(async function () {
    this.timeout(180_000); // initdb and PostgreSQL's first start
    postgres = await sharedPostgresTestServer();
    const storeUrl = postgres.url();
    // The failure limit is low enough to reach in a test; only the throttle test fails credentials (from addresses of its own).
    const env = { STORE_URL: storeUrl, AUTH_FAILURE_LIMIT: String(FAILURE_LIMIT), AUTH_FAILURE_WINDOW_SECONDS: '600' };
    a = await readyServer(env);
    b = await readyServer({ ...env, ISSUER: a.config.issuer });
    idp = await startRegisteredDevIdp(a);
  });

  after(async function () {
    await idp?.close();
    await b?.close();
    await a?.close();
  });

  it('publishes the same JWKS on both nodes', async function () {
    const [jwksA, jwksB] = await Promise.all(
      [a, b].map(async (node) => (await node.request('/.well-known/jwks.json')).json()),
    );
    expect((jwksA as { keys: unknown[] }).keys).to.have.length.above(0);
    expect(jwksB).to.deep.equal(jwksA);
  });

  it("publishes a tenant's own keys, the same on both nodes (made with the tenant, kept in the store)", async function () {
    expect((await a.admin('POST', '/tenants', { id: 'nodes-acme' })).status).to.equal(201);
    const kids = async (node: TestServer, path: string, tenant?: string) =>
      ((await (await node.request(path, { tenant })).json()) as { keys: { kid: string }[] }).keys.map((key) => key.kid);
    const [atA, atB, byHeaderAtB, shared] = await Promise.all([
      kids(a, '/t/nodes-acme/.well-known/jwks.json'),
      kids(b, '/t/nodes-acme/.well-known/jwks.json'),
      kids(b, '/.well-known/jwks.json', 'nodes-acme'),
      kids(b, '/.well-known/jwks.json'),
    ]);
    expect(atA).to.have.length.above(0);
    expect(atB).to.deep.equal(atA);
    expect(byHeaderAtB).to.deep.equal(atA);
    expect(atA.filter((kid) => shared.includes(kid))).to.be.empty;
  });

  it('serves on B a client created on A, and introspects on B a token A issued', async function () {
    const secret = await confidentialClient(a, 'shared-client', { scopes: ['read'] });
    const rsSecret = await confidentialClient(a, 'shared-rs', { scopes: ['introspection'] });
    const fromB = await clientCredentials(b, 'shared-client', secret, { scope: 'read' });
    expect(fromB.status, JSON.stringify(fromB.body)).to.equal(200);
    const fromA = await clientCredentials(a, 'shared-client', secret, { scope: 'read' });
    const caller = await clientCredentials(b, 'shared-rs', rsSecret, { scope: 'introspection' });
    const shown = await postForm(
      b,
      '/introspect',
      { token: fromA.body.access_token },
      { Authorization: `Bearer ${caller.body.access_token}` },
    );
    expect(shown.body).to.include({ active: true, client_id: 'shared-client', scope: 'read' });
  });

  it('introspects a jit_single_use token as active once when A and B are asked at once, round after round', async function () {
    const secret = await confidentialClient(a, 'single-use-client', { scopes: ['read'] });
    const rsSecret = await confidentialClient(a, 'single-use-rs', { scopes: ['introspection'] });
    const resource = 'https://tickets.multi-node.example.test/';
    const rs = (await a.admin('GET', '/clients/single-use-rs')).body;
    const made = await a.admin('POST', '/resource-servers', {
      resourceIndicator: resource,
      typeUris: ['urn:example:single-use-tickets'],
      clientId: rs.id,
    });
    expect(made.status, JSON.stringify(made.body)).to.equal(201);
    await updateOauthData(a, (data) => {
      data.resource_types['urn:example:single-use-tickets'] = { scopes: ['read'], jit_single_use: true };
    });
    const issue = (node: TestServer) =>
      clientCredentials(node, 'single-use-client', secret, { scope: 'read', resource });
    await eventually(async () => (await issue(a)).status === 200 && (await issue(b)).status === 200);
    const caller = (await clientCredentials(a, 'single-use-rs', rsSecret, { scope: 'introspection' })).body
      .access_token;
    for (let round = 1; round <= RACE_ROUNDS; round += 1) {
      const token = (await issue(a)).body.access_token as string;
      const answers = await Promise.all(
        [a, b, a, b].map((node) => postForm(node, '/introspect', { token }, { Authorization: `Bearer ${caller}` })),
      );
      expect(answers.map(({ status }) => status)).to.deep.equal([200, 200, 200, 200]);
      expect(
        answers.filter(({ body }) => body.active === true),
        `round ${round}`,
      ).to.have.length(1);
    }
  });

  it('refuses on B, at once, the tokens of a client disabled, deleted or revoked through A', async function () {
    const rsSecret = await confidentialClient(a, 'revoking-rs', { scopes: ['introspection'] });
    const caller = await clientCredentials(b, 'revoking-rs', rsSecret, { scope: 'introspection' });
    const activeOnB = async (token: string) =>
      (await postForm(b, '/introspect', { token }, { Authorization: `Bearer ${caller.body.access_token}` })).body
        .active as boolean;
    const tokenOf = async (clientId: string) => {
      const secret = await confidentialClient(a, clientId, { scopes: ['read'] });
      const issued = await clientCredentials(b, clientId, secret, { scope: 'read' });
      expect(await activeOnB(issued.body.access_token)).to.equal(true);
      return issued.body.access_token as string;
    };
    const [disabled, deleted, revoked] = (await Promise.all(
      ['gone-disabled', 'gone-deleted', 'gone-revoked'].map(tokenOf),
    )) as [string, string, string];
    const record = (await a.admin('GET', '/clients/gone-disabled')).body;
    const { id: _id, createdAt: _created, updatedAt: _updated, ...fields } = record;
    expect((await a.admin('PUT', '/clients/gone-disabled', { ...fields, enabled: false })).status).to.equal(200);
    expect((await a.admin('DELETE', '/clients/gone-deleted')).status).to.equal(204);
    expect((await a.admin('POST', '/clients/gone-revoked/revoke-tokens')).status).to.equal(200);
    // No waiting: B reads every token from the store on each use.
    expect(await Promise.all([disabled, deleted, revoked].map(activeOnB))).to.deep.equal([false, false, false]);
  });

  it('redeems on B a code issued by A, and kills on B a refresh token rotated on A', async function () {
    const spa = await registerPublicClient(a, 'http://127.0.0.1:1/multi-node/cb');
    const request = await authorizationRequest(a, spa);
    const agent = new FetchUserAgent();
    const login = await agent.navigate(request.url, arrivingAt(spa.redirectUri));
    const code = (await passDevIdpForms(agent, login, 'alice', arrivingAt(spa.redirectUri))).url.searchParams.get(
      'code',
    )!;
    const tokens = await redeemCode(b, spa, code, request.codeVerifier);
    expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    const rotated = await postForm(a, '/token', {
      grant_type: 'refresh_token',
      refresh_token: tokens.body.refresh_token,
      client_id: spa.clientId,
    });
    expect(rotated.status, JSON.stringify(rotated.body)).to.equal(200);
    expect(rotated.body.refresh_token).to.not.equal(tokens.body.refresh_token);
    const replayed = await postForm(b, '/token', {
      grant_type: 'refresh_token',
      refresh_token: tokens.body.refresh_token,
      client_id: spa.clientId,
    });
    expect(replayed.status).to.equal(400);
    expect(replayed.body.error).to.equal('invalid_grant');
    // Reuse of a rotated refresh token revokes its whole family (OAuth 2.1 §4.3.1), on every node.
    expect(
      (
        await postForm(b, '/token', {
          grant_type: 'refresh_token',
          refresh_token: rotated.body.refresh_token,
          client_id: spa.clientId,
        })
      ).body.error,
    ).to.equal('invalid_grant');
  });

  it('completes on B a sign-in started on A: the upstream callback and the rest of the interaction on B', async function () {
    const spa = await registerPublicClient(a, 'http://127.0.0.1:1/multi-node-sign-in/cb');
    const atClient = arrivingAt(spa.redirectUri);
    const onA = (url: URL) => url.host === new URL(a.url).host;
    const request = await authorizationRequest(a, spa);
    const agent = new FetchUserAgent();
    // A takes the authorization request and its login interaction, and sends the user upstream.
    const login = await agent.navigate(request.url, (url) => url.host === idp.host);
    const loginPage = await agent.navigate(login.url, atClient);
    // The balancer sends everything after the upstream login to B (cookies go with the host name).
    let page = await passDevIdpForms(agent, loginPage, 'bob', (url) => onA(url) || atClient(url));
    for (let hops = 0; hops < 10 && !atClient(page.url); hops += 1) {
      expect(page.status, `${page.url.href} answered ${page.status}: ${page.body}`).to.equal(undefined);
      page = await agent.navigate(onNode(b, page.url), (url) => onA(url) || atClient(url));
    }

    expect(pathsVisitedOn(a, agent)).to.deep.equal(['/authorize', '/interaction/:uid']);
    expect(pathsVisitedOn(b, agent)).to.deep.equal([
      '/idp/callback/:idp',
      '/interaction/:uid/upstream-done',
      '/authorize/:uid',
    ]);
    expect(page.url.searchParams.get('state')).to.equal(request.state);
    const code = page.url.searchParams.get('code');
    expect(code, page.url.href).to.be.a('string');
    const tokens = await redeemCode(b, spa, code!, request.codeVerifier);
    expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
    const userinfo = await a.request('/userinfo', { headers: { Authorization: `Bearer ${tokens.body.access_token}` } });
    expect(await userinfo.json()).to.include({ sub: 'bob' });
  });

  it('counts authentication failures on both nodes together: N nodes do not give an attacker N times the tries', async function () {
    const secret = await confidentialClient(a, 'guessed-on-two-nodes', { scopes: ['read'] });
    const token = (node: TestServer, clientSecret: string, from: string) =>
      rawRequest(node.url, {
        method: 'POST',
        path: '/token',
        localAddress: from,
        headers: { ...FORM, Authorization: basic('guessed-on-two-nodes', clientSecret) },
        body: 'grant_type=client_credentials&scope=read',
      });
    for (let attempt = 0; attempt < FAILURE_LIMIT; attempt++)
      expect((await token(attempt % 2 ? b : a, 'not-the-secret', '127.0.3.1')).status, `guess ${attempt + 1}`).to.equal(
        401,
      );
    for (const node of [a, b]) {
      const refused = await token(node, 'not-the-secret', '127.0.3.1');
      expect(refused.status, node === a ? 'on A' : 'on B').to.equal(429);
      expect(Number(refused.headers['retry-after'])).to.be.within(1, 600);
    }
    expect((await token(b, secret, '127.0.3.1')).status, 'the right secret: not verified, no oracle').to.equal(429);
    expect((await token(a, secret, '127.0.3.2')).status, 'from another address').to.equal(200);
  });

  it('puts a policy change made through A in force on both nodes within 1.5 s of its acknowledgement', async function () {
    const entries = (await a.admin('GET', '/policy-data?bundledOnly=true')).body as {
      dataKey: string;
      payload: string;
    }[];
    const data = JSON.parse(entries.find((entry) => entry.dataKey === 'oauth')!.payload);
    // A field the pack's data schema knows (policies/oauth/data.schema.json), changed each time.
    data.software_statements = { denylist: [`multi-node-probe-${Date.now()}`] };
    const saved = await a.admin('PUT', '/policy-data/by-key?dataKey=oauth', {
      dataKey: 'oauth',
      payload: JSON.stringify(data),
    });
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200);
    const acknowledged = Date.now();
    const storeRevision = (await revisionsOf(a)).store;
    // Both OPAs long poll the bundle; each node is told of the write within a round trip (NOTIFY).
    const inForceAfter = await Promise.all(
      [a, b].map(async (node) => {
        while (Date.now() - acknowledged < 10_000) {
          const revisions = await revisionsOf(node);
          if (revisions.store === storeRevision && revisions.opa === storeRevision) return Date.now() - acknowledged;
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
        return Infinity;
      }),
    );
    console.log(`      (in force on OPA after ${inForceAfter.join(' and ')} ms on A and B)`);
    expect(Math.max(...inForceAfter), `in force after ${inForceAfter.join(' and ')} ms on A and B`).to.be.below(1_500);
  });

  it("reads the policy records about once a second on each idle node, not at every 100 ms look of its OPA's held bundle poll", async function () {
    if (!postgres.directory) this.skip(); // pg_stat_statements of the cluster of this run
    const policyReads = () =>
      Number(
        postgres.sql(
          `SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE '%FROM "c_policy_rules"%'`,
        )[0]![0],
      );
    const before = policyReads();
    const started = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const seconds = (Date.now() - started) / 1000;
    const perNodeAndSecond = (policyReads() - before) / 2 / seconds;
    // Each node's OPA holds a bundle request that looks every 100 ms (10 reads a second before), and the
    // signals' watch reads the revision every second (2 a second before they shared one held read); a
    // write is announced (NOTIFY). About 1 a second, more by the window's edges.
    expect(perNodeAndSecond, `${perNodeAndSecond.toFixed(1)} reads per node and second`).to.be.at.most(1.75);
  });

  /** What GET /healthz of `node` says of the policy revisions: the store's, and the one its OPA serves. */
  async function revisionsOf(node: TestServer): Promise<{ store: string; opa: string | null }> {
    return (
      (await (await node.request('/healthz')).json()) as { policyRevision: { store: string; opa: string | null } }
    ).policyRevision;
  }

  /** The paths `agent` requested from `node`, in order, with interaction ids as `:uid`. */
  function pathsVisitedOn(node: TestServer, agent: FetchUserAgent): string[] {
    const host = new URL(node.url).host;
    return agent.visited
      .filter((url) => url.host === host)
      .map((url) =>
        url.pathname
          .replace(/^\/(interaction|authorize)\/[^/]+/, '/$1/:uid')
          .replace(/^\/idp\/callback\/[^/]+$/, '/idp/callback/:idp'),
      );
  }

  /** The same URL on `node` (both nodes have one issuer; a balancer picks the node). */
  function onNode(node: TestServer, url: URL): URL {
    return new URL(`${url.pathname}${url.search}`, node.url);
  }

  it('redeems a code exactly once when A and B race for it, round after round', async function () {
    this.timeout(120_000);
    const spa = await registerPublicClient(a, 'http://127.0.0.1:1/multi-node-race/cb');
    for (let round = 1; round <= RACE_ROUNDS; round += 1) {
      const request = await authorizationRequest(a, spa);
      const agent = new FetchUserAgent();
      const login = await agent.navigate(request.url, arrivingAt(spa.redirectUri));
      const code = (await passDevIdpForms(agent, login, 'alice', arrivingAt(spa.redirectUri))).url.searchParams.get(
        'code',
      )!;
      const answers = await Promise.all([a, b, a, b].map((node) => redeemCode(node, spa, code, request.codeVerifier)));
      const statuses = answers.map((answer) => `${answer.status} ${answer.body.error ?? ''}`.trim()).sort();
      expect(statuses, `round ${round}`).to.deep.equal([
        '200',
        '400 invalid_grant',
        '400 invalid_grant',
        '400 invalid_grant',
      ]);
    }
  });
});
