import { expect } from 'chai';
import { readyServer, withServer, type TestServer } from '../support/server.js';
import { basic, confidentialClient, FORM } from '../support/oauth.js';
import { preferredBackend, sharedMongoTestServer } from '../store/mongo-server.js';
import { sharedPostgresTestServer } from '../store/postgres-server.js';
import { type AuditEntry } from '../../src/audit/log.js';
import { AUDIT_LOG_COLLECTION } from '../../src/audit/collections.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';

const NUL = '\u0000';

interface Attempt {
  name: string;
  /** The error code of the 400, when not invalid_request. */
  error?: string;
  send: (server: TestServer, headers: Record<string, string>) => Promise<Response>;
}

/** A client_credentials request of the file's client, with `extra` appended to the form as written (already encoded). */
const tokenWith = (extra: string): Attempt['send'] => {
  return (server, headers) =>
    server.request('/token', {
      method: 'POST',
      headers: { ...FORM, Authorization: basic(CLIENT, `${CLIENT}-secret-value`), ...headers },
      body: `grant_type=client_credentials&${extra}`,
    });
};

const admin =
  (method: string, path: string, json?: unknown): Attempt['send'] =>
  (server, headers) =>
    server.request(`/admin/api${path}`, { method, json, admin: true, headers });

const CLIENT = 'nul-bytes-client';

/** Each way a U+0000 reached the store (FerretDB over PostgreSQL answered 500, or issued a token unaudited). */
const ATTEMPTS: Attempt[] = [
  {
    name: 'Admin API: a client id',
    send: admin('POST', '/clients', { clientId: `nul${NUL}client`, clientType: 'public' }),
  },
  { name: 'Admin API: a subject id', send: admin('POST', '/subjects', { subjectId: `nul${NUL}subject` }) },
  {
    name: "Admin API: a scope in a resource type's list",
    send: admin('POST', '/resource-types', { typeUri: 'urn:nul:type', name: 'T', scopes: [`read${NUL}`] }),
  },
  { name: 'Admin API: the path', send: admin('GET', '/clients/nul%00client') },
  { name: '/token: a resource value', send: tokenWith('resource=https%3A%2F%2Fa.example%2F%00') },
  { name: '/token: a parameter name', send: tokenWith('x%00=1') },
  {
    name: '/token: a JSON-valued parameter',
    error: 'invalid_authorization_details',
    send: tokenWith(`authorization_details=${encodeURIComponent('[{"type":"a\\u0000"}]')}`),
  },
  {
    name: '/token: the client id of Basic credentials',
    send: (server, headers) =>
      server.request('/token', {
        method: 'POST',
        headers: { ...FORM, Authorization: basic(`nul${NUL}`, 'secret'), ...headers },
        body: 'grant_type=client_credentials',
      }),
  },
  {
    name: '/authorize: a query parameter',
    send: (server, headers) =>
      server.request(`/authorize?response_type=code&client_id=${CLIENT}%00&scope=openid`, { headers }),
  },
];

/**
 * Issue 33 item 8: U+0000 is refused with a 400 at the edge, before anything reads or stores it,
 * on every store; the refusal is audited like any other (its entry without the character).
 */
function describeNulRefusal(leg: string, start: () => Promise<{ server: TestServer; stop: () => Promise<void> }>) {
  describe(`U+0000 in a request (${leg})`, function () {
    this.timeout(900_000); // the first FerretDB build downloads and compiles Go modules
    let server: TestServer;
    let stop: () => Promise<void>;

    before(async function () {
      ({ server, stop } = await start());
      await confidentialClient(server, CLIENT, { scopes: ['read'] });
    });
    after(async function () {
      await stop?.();
    });

    for (const [n, attempt] of ATTEMPTS.entries()) {
      it(`${attempt.name}: 400 invalid_request, audited`, async function () {
        const requestId = `nul-bytes-${leg.replace(/\W+/g, '-')}-${n}-${Date.now()}`;
        const response = await attempt.send(server, { 'X-Request-Id': requestId });
        const body = (await response.json()) as { error: string; error_description: string };
        expect(response.status, JSON.stringify(body)).to.equal(400);
        expect(body.error).to.equal(attempt.error ?? 'invalid_request');
        expect(body.error_description).to.match(/U\+0000/);
        const entries = await server.store
          .collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT)
          .find({ requestId });
        expect(entries, 'its audit entry').to.have.length(1);
        expect(JSON.stringify(entries[0]), 'no U+0000 in it').to.not.include('\\u0000');
      });
    }
  });
}

describeNulRefusal('SQLite', async () => ({ server: await withServer(), stop: async () => {} }));

describeNulRefusal(`FerretDB over ${preferredBackend()}`, async () => {
  const mongo = await sharedMongoTestServer(preferredBackend());
  const server = await readyServer({ STORE_URL: mongo.uri(mongo.freshDatabase()) });
  return { server, stop: () => server.close() };
});

describeNulRefusal('PostgreSQL', async () => {
  const postgres = await sharedPostgresTestServer();
  const server = await readyServer({ STORE_URL: postgres.url() });
  return { server, stop: () => server.close() };
});

describe('U+0000 in a long field name', function () {
  it('names the field cut short, never echoing the whole name (found 2026-11-30: 120 KB for a 60,000-character name)', async function () {
    const server = await withServer();
    const response = await server.request('/token', {
      method: 'POST',
      headers: FORM,
      body: `grant_type=client_credentials&${'K'.repeat(60_000)}%00=1`,
    });
    const text = await response.text();
    expect(response.status).to.equal(400);
    expect(text.length, text.slice(0, 200)).to.be.below(1000);
    expect(JSON.parse(text).error_description).to.match(/^K{64}… in .*U\+0000/);
  });

  it('names an unknown field of a JSON body cut short too', async function () {
    const server = await withServer();
    const response = await server.request('/admin/api/clients', {
      method: 'POST',
      admin: true,
      json: { clientId: 'long-field-name', clientType: 'public', ['F'.repeat(60_000)]: 1 },
    });
    const text = await response.text();
    expect(response.status).to.equal(400);
    expect(text.length, text.slice(0, 200)).to.be.below(1000);
    expect(JSON.parse(text).error_description).to.match(/^F{64}… is not a known field/);
  });
});
