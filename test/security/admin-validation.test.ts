import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, authorizationRequest, registerPublicClient } from '../support/dev-idp.js';
import { inTenant, withServer, type TestServer } from '../support/server.js';

/**
 * Issue 33, items 6 and 14: what an Admin API key may write is checked as strictly as what a
 * protocol caller may. An `operator` key must not point an upstream IdP's stored client secret
 * at a server of its own (it was never told the secret), and no key may store a client URI
 * that dynamic registration refuses (a `javascript:` redirect URI, …).
 */
describe('Admin API validation: secrets follow their destination, client URIs as at registration', function () {
  const TENANT = 'admin-validation';
  let server: TestServer;
  let operator: (method: string, path: string, json?: unknown) => ReturnType<TestServer['admin']>;

  before(async function () {
    server = inTenant(await withServer(), TENANT);
    const created = await server.admin('POST', '/api-keys', {
      name: `admin-validation operator ${randomBytes(4).toString('hex')}`,
      role: 'operator',
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const key: string = created.body.key;
    operator = (method, path, json) => server.admin(method, path, json, { 'X-Admin-API-Key': key });
  });

  describe('an upstream IdP’s stored client secret (item 6)', function () {
    const REDIRECT = 'http://127.0.0.1:1/admin-validation/cb';
    const CLIENT_ID = 'arbiter-at-upstream';
    const SECRET = randomBytes(24).toString('base64url');
    let upstream: MinimalIdp;
    let attacker: MinimalIdp;
    let idpId: string;

    before(async function () {
      upstream = await startMinimalIdp();
      attacker = await startMinimalIdp();
      const created = await server.admin('POST', '/identity-providers', {
        idpId: 'stolen-secret-target',
        issuer: upstream.issuer,
        name: 'The real upstream',
        clientId: CLIENT_ID,
        clientSecret: SECRET,
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      idpId = created.body.idpId;
    });

    after(async function () {
      await upstream?.close();
      await attacker?.close();
    });

    /** The IdP record as the operator last read it, with `changes`: what a console edit sends back. */
    async function edited(changes: Record<string, unknown>) {
      const { body } = await operator('GET', `/identity-providers/${idpId}`);
      const { id: _id, tenantId: _tenant, createdAt: _created, updatedAt: _updated, ...fields } = body;
      return operator('PUT', `/identity-providers/${idpId}`, { ...fields, ...changes });
    }

    it('refuses a new issuer without the secret given again, naming the rule', async function () {
      const answer = await edited({ issuer: attacker.issuer });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
      expect(answer.body.error).to.equal('invalid_request');
      expect(answer.body.error_description).to.match(/clientSecret must be given again to change issuer/);
      expect((await operator('GET', `/identity-providers/${idpId}`)).body.issuer).to.equal(upstream.issuer);
    });

    it('refuses a new token endpoint, or dropping the one set, without the secret', async function () {
      const moved = await edited({ tokenEndpoint: `${attacker.issuer}/token` });
      expect(moved.status, JSON.stringify(moved.body)).to.equal(400);
      expect(moved.body.error_description).to.match(/change tokenEndpoint/);
      const both = await edited({ issuer: attacker.issuer, tokenEndpoint: `${attacker.issuer}/token` });
      expect(both.body.error_description).to.match(/change issuer and tokenEndpoint/);
    });

    it('so the next sign-in, which anyone can start, sends the secret to the real upstream only', async function () {
      await edited({ issuer: attacker.issuer });
      const client = await registerPublicClient(server, REDIRECT, { clientId: 'admin-validation-spa' });
      const request = await authorizationRequest(server, client, { upstream_idp: idpId });
      const agent = new FetchUserAgent({ [new URL(server.config.issuer).host]: { 'X-Tenant-Id': TENANT } });
      const page = await agent.navigate(request.url, arrivingAt(REDIRECT));
      expect(page.url.href, 'the sign-in ends at the client').to.match(
        /^http:\/\/127\.0\.0\.1:1\/admin-validation\/cb/,
      );
      expect(upstream.secretsSeen(SECRET), 'the journey reached the real token endpoint').to.equal(1);
      expect(attacker.requests, 'the attacker’s server is never even asked').to.deep.equal([]);
    });

    it('takes a new destination with a secret given in the same write, and other edits without one', async function () {
      const renamed = await edited({ name: 'The real upstream, renamed' });
      expect(renamed.status, JSON.stringify(renamed.body)).to.equal(200);
      expect(renamed.body).to.not.have.property('clientSecret');
      const ownSecret = await edited({ issuer: attacker.issuer, clientSecret: 'a secret of the operator’s own' });
      expect(ownSecret.status, JSON.stringify(ownSecret.body)).to.equal(200);
      expect(attacker.secretsSeen(SECRET)).to.equal(0);
    });
  });

  describe('client URIs, checked as dynamic registration checks them (item 14)', function () {
    let sequence = 0;
    const client = (fields: Record<string, unknown>) => ({
      clientId: `uri-check-${(sequence += 1)}`,
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      ...fields,
    });

    for (const [uri, why] of [
      ['javascript:alert(document.cookie)', /must be http or https URIs/],
      ['javascript://app.example/%0aalert(1)', /must be http or https URIs/],
      [
        'data:text/html,<script>alert(1)</script>',
        /must match format "uri"|must be absolute URIs|must be http or https URIs/,
      ],
      ['file:///etc/passwd', /must be http or https URIs/],
      ['com.example.app:/callback', /must be http or https URIs/],
      ['http://app.example/cb', /must use https, except on the loopback interface/],
      ['https://app.example/cb#fragment', /must not contain a fragment/],
      ['https://user:pw@app.example/cb', /must not contain credentials/],
      ['https://*.app.example/cb', /must not contain a wildcard/],
    ] as const) {
      it(`refuses the redirect URI ${uri} with a 400 naming redirectUris`, async function () {
        const answer = await operator('POST', '/clients', client({ redirectUris: ['https://app.example/ok', uri] }));
        expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
        expect(answer.body.error).to.equal('invalid_request');
        // A URI the schema's `uri` format already refuses is named with its index (redirectUris.1).
        expect(answer.body.field).to.match(/^redirectUris(\.1)?$/);
        expect(answer.body.error_description).to.match(why);
      });
    }

    it('refuses the same of a post-logout redirect URI, a replace and a validate call', async function () {
      const logout = await operator(
        'POST',
        '/clients',
        client({ redirectUris: ['https://app.example/cb'], postLogoutRedirectUris: ['javascript:alert(1)'] }),
      );
      expect(logout.status, JSON.stringify(logout.body)).to.equal(400);
      expect(logout.body.field).to.equal('postLogoutRedirectUris');
      const good = client({ redirectUris: ['https://app.example/cb'] });
      expect((await operator('POST', '/clients', good)).status).to.equal(201);
      const replaced = await operator('PUT', `/clients/${good.clientId}`, {
        ...good,
        redirectUris: ['javascript:alert(1)'],
      });
      expect(replaced.status, JSON.stringify(replaced.body)).to.equal(400);
      expect((await operator('GET', `/clients/${good.clientId}`)).body.redirectUris).to.deep.equal([
        'https://app.example/cb',
      ]);
      const validated = await operator('POST', '/clients/validate', client({ redirectUris: ['data:,x'] }));
      expect(validated.status, JSON.stringify(validated.body)).to.equal(400);
    });

    it('refuses a JWKS URI with a fragment and a web page that is not http(s), as registration does', async function () {
      const jwks = await operator('POST', '/clients', client({ jwksUri: 'https://app.example/jwks#keys' }));
      expect(jwks.status, JSON.stringify(jwks.body)).to.equal(400);
      expect(jwks.body.error_description).to.match(/^jwksUri must not contain a fragment/);
      const page = await operator('POST', '/clients', client({ clientUri: 'javascript:alert(1)' }));
      expect(page.status, JSON.stringify(page.body)).to.equal(400);
      expect(page.body.field).to.equal('clientUri');
    });

    it('refuses a private or symmetric key in a client’s JWK Set (it would be kept and shown back), as registration does', async function () {
      const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const privateJwk = { ...privateKey.export({ format: 'jwk' }), kid: 'signing' };
      for (const key of [privateJwk, { kty: 'oct', k: 'c2hhcmVkLXNlY3JldA', kid: 'shared' }]) {
        const answer = await operator('POST', '/clients', client({ clientId: 'private-jwks', jwks: { keys: [key] } }));
        expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
        expect(answer.body.field).to.equal('jwks');
        expect(answer.body.error_description).to.match(/^jwks must hold public keys only/);
      }
      expect((await operator('GET', '/clients/private-jwks')).status).to.equal(404);
      const publicJwk = { ...publicKey.export({ format: 'jwk' }), kid: 'signing' };
      const taken = await operator('POST', '/clients', client({ jwks: { keys: [publicJwk] } }));
      expect(taken.status, JSON.stringify(taken.body)).to.equal(201);
      const replaced = await operator('PUT', `/clients/${taken.body.clientId}`, {
        ...client({ clientId: taken.body.clientId }),
        jwks: { keys: [privateJwk] },
      });
      expect(replaced.status, JSON.stringify(replaced.body)).to.equal(400);
    });

    it('takes what registration takes: https anywhere, http on the loopback interface', async function () {
      const answer = await operator(
        'POST',
        '/clients',
        client({
          redirectUris: [
            'https://app.example/cb?x=1',
            'http://127.0.0.1:8080/cb',
            'http://[::1]/cb',
            'http://localhost/cb',
          ],
          postLogoutRedirectUris: ['https://app.example/bye'],
          clientUri: 'http://app.example/',
        }),
      );
      expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    });
  });

  // Found 2026-11-30: a client `..` was stored, and then no path could name it: /admin/api/clients/..
  // is a dot segment, so the client could be neither disabled, revoked nor deleted.
  it('refuses a client id of dots alone, which no Admin API path could name', async function () {
    for (const key of ['.', '..', '...']) {
      const client = await operator('POST', '/clients', {
        clientId: key,
        clientType: 'public',
        tokenEndpointAuthMethod: 'none',
      });
      expect(client.status, JSON.stringify(client.body)).to.equal(400);
      expect(client.body.field).to.equal('clientId');
    }
    const dotted = await operator('POST', '/clients', {
      clientId: '.dotted.',
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
    });
    expect(dotted.status, 'dots beside other characters are a key').to.equal(201);
  });
});

interface MinimalIdp {
  issuer: string;
  /** Every request it was sent: method, path, headers and body. */
  requests: { method: string; path: string; headers: IncomingMessage['headers']; body: string }[];
  /** How many requests carried `secret`: in clear, or inside Basic credentials. */
  secretsSeen(secret: string): number;
  close(): Promise<void>;
}

/**
 * Just enough of an OpenID provider for a sign-in to reach its token endpoint: discovery, an
 * authorization endpoint that sends the user straight back with a code, and a token endpoint
 * that refuses every code. It records everything it is sent.
 */
async function startMinimalIdp(): Promise<MinimalIdp> {
  const requests: MinimalIdp['requests'] = [];
  let issuer = '';
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const url = new URL(request.url ?? '/', issuer);
      requests.push({
        method: request.method ?? '',
        path: url.pathname,
        headers: request.headers,
        body: Buffer.concat(chunks).toString(),
      });
      const json = (status: number, body: unknown) => {
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end(JSON.stringify(body));
      };
      if (url.pathname === '/.well-known/openid-configuration')
        return json(200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/jwks`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
        });
      if (url.pathname === '/authorize') {
        const back = new URL(url.searchParams.get('redirect_uri') ?? '');
        back.search = new URLSearchParams({ code: 'any-code', state: url.searchParams.get('state') ?? '' }).toString();
        response.writeHead(302, { location: back.href });
        return response.end();
      }
      if (url.pathname === '/token') return json(400, { error: 'invalid_grant' });
      if (url.pathname === '/jwks') return json(200, { keys: [] });
      json(404, { error: 'not_found' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://localhost:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    requests,
    secretsSeen: (secret) =>
      requests.filter((seen) => {
        const basic = /^Basic (.+)$/i.exec(seen.headers.authorization ?? '')?.[1];
        const credentials = basic ? decodeURIComponent(Buffer.from(basic, 'base64').toString()) : '';
        return [credentials, seen.body, JSON.stringify(seen.headers), seen.path].some((text) => text.includes(secret));
      }).length,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
