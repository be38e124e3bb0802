import Database from 'better-sqlite3';
import { expect } from 'chai';
import { readyServer, type TestServer } from '../support/server.js';
import { basic, confidentialClient, FORM } from '../support/oauth.js';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  registerPublicClient,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import { sharedMongoTestServer, type MongoTestServer } from '../store/mongo-server.js';
import { physicalName } from '../../adapters/shared/spec.js';
import { OIDC_COLLECTION } from '../../adapters/oidc/collection.js';
import { type AuditEntry } from '../../src/audit/log.js';
import { AUDIT_LOG_COLLECTION } from '../../src/audit/collections.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';

const CLIENT = 'audit-or-nothing';
const SECRET = `${CLIENT}-secret-value`;

/** A store whose audit table refuses every insert until the returned function is called. */
type RefuseAuditWrites = (server: TestServer) => Promise<() => Promise<void>>;

interface Answer {
  requestId: string;
  status: number;
  retryAfter: string | null;
  body: Record<string, unknown>;
}

/** POST /token, client_credentials, with the right secret or a wrong one; the answer and its X-Request-Id. */
async function tokenRequest(server: TestServer, secret: string): Promise<Answer> {
  const response = await server.request('/token', {
    method: 'POST',
    headers: { ...FORM, Authorization: basic(CLIENT, secret) },
    body: 'grant_type=client_credentials&scope=read',
  });
  return {
    requestId: response.headers.get('x-request-id')!,
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: (await response.json()) as Record<string, unknown>,
  };
}

async function auditedIds(server: TestServer, answers: Answer[]): Promise<Set<string>> {
  const entries = server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
  const found = await Promise.all(answers.map(({ requestId }) => entries.find({ requestId })));
  return new Set(found.flat().map((entry) => entry.requestId!));
}

/** A client's stored artefacts of one model (each token or code usable by whoever holds its value). */
async function stored(server: TestServer, model: string, clientId: string): Promise<number> {
  return server.store.collection(OIDC_COLLECTION, DEFAULT_TENANT).count({ model, clientId });
}

const storedTokens = (server: TestServer) => stored(server, 'ClientCredentials', CLIENT);

/** Signs in through the dev IdP, stopping before the request to Arbiter for which `stopAt` is true. */
async function signIn(server: TestServer, redirectUri: string, clientId: string, stopAt: (url: URL) => boolean) {
  const agent = new FetchUserAgent();
  const request = await authorizationRequest(server, { clientId, redirectUri });
  const loginPage = await agent.navigate(request.url, stopAt);
  const page = await passDevIdpForms(agent, loginPage, `audit-or-nothing-${clientId}`, stopAt);
  return { agent, page };
}

/**
 * Issue 33 item 8 and issue 34 item 1: an answer never goes out without its audit entry. While
 * the store refuses audit writes (and only those), every answer is a 503 with Retry-After and
 * no token it issued stays in the store; afterwards every answered request id is in the log.
 */
function describeAuditOrNothing(leg: string, start: () => Promise<TestServer>, refuse: RefuseAuditWrites) {
  describe(`No answer without its audit entry (${leg})`, function () {
    this.timeout(900_000); // the first FerretDB build downloads and compiles Go modules
    let server: TestServer;
    let idp: RegisteredDevIdp;

    before(async function () {
      server = await start();
      await confidentialClient(server, CLIENT, { scopes: ['read'] });
      idp = await startRegisteredDevIdp(server);
    });
    after(async function () {
      await idp?.close();
      await server?.close();
    });

    it('answers 503 with Retry-After while audit writes fail, withdraws the tokens it issued, and misses no entry of an answered request', async function () {
      const tokensBefore = await storedTokens(server);
      const allow = await refuse(server);
      let during: Answer[];
      try {
        during = await Promise.all([
          ...Array.from({ length: 10 }, () => tokenRequest(server, SECRET)),
          ...Array.from({ length: 5 }, () => tokenRequest(server, 'a-wrong-secret')),
        ]);
      } finally {
        await allow();
      }
      const statuses = during.map((answer) => answer.status);
      console.log(`      while refused: ${JSON.stringify(statuses)}`);
      const audited = await auditedIds(server, during);
      const missing = during.filter((answer) => !audited.has(answer.requestId));
      expect(
        missing.filter((answer) => answer.status !== 503).map((answer) => answer.status),
        'answered without an entry',
      ).to.deep.equal([]);
      for (const answer of missing) {
        expect(answer.retryAfter).to.match(/^\d+$/);
        expect(answer.body.error).to.equal('temporarily_unavailable');
        expect(answer.body).to.not.have.property('access_token');
      }
      expect(missing, 'the audit writes did fail').to.have.length(during.length);
      expect(await storedTokens(server), 'tokens left in the store').to.equal(tokensBefore);

      const after = await tokenRequest(server, SECRET);
      expect(after.status, 'once the store takes audit entries again').to.equal(200);
      expect((await auditedIds(server, [after])).has(after.requestId)).to.equal(true);
      expect(await storedTokens(server), 'the count sees a stored token').to.equal(tokensBefore + 1);
    });

    it('answers 503 without Location to the sign-in step that would issue a code, and keeps no code', async function () {
      const redirectUri = 'https://app.audit-or-nothing.test/cb';
      const { clientId } = await registerPublicClient(server, redirectUri);
      const issuer = new URL(server.config.issuer).origin;
      // A first sign-in finds the step of Arbiter's that redirects to the client with the code.
      const { agent } = await signIn(server, redirectUri, clientId, arrivingAt(redirectUri));
      const last = agent.visited.filter((url) => url.origin === issuer).at(-1)!;
      const step = last.pathname.slice(0, last.pathname.lastIndexOf('/') + 1);
      const codesBefore = await stored(server, 'AuthorizationCode', clientId);
      expect(codesBefore, 'the first sign-in stored its code').to.equal(1);

      const refused = await signIn(
        server,
        redirectUri,
        clientId,
        (url) => url.origin === issuer && url.pathname.startsWith(step),
      );
      const allow = await refuse(server);
      let answer;
      try {
        answer = await refused.agent.navigate(refused.page.url, arrivingAt(redirectUri));
      } finally {
        await allow();
      }
      expect(answer.status, `${step}: ${answer.body}`).to.equal(503);
      expect(answer.url.href, 'no redirect to the client').to.not.include(redirectUri);
      expect(await stored(server, 'AuthorizationCode', clientId), 'codes kept').to.equal(codesBefore);
    });
  });
}

describeAuditOrNothing(
  'SQLite',
  // Its own server: its audit table is made to refuse writes.
  () => readyServer(),
  async (server) => {
    const database = new Database(server.config.storeUrl.slice('sqlite:'.length));
    const table = physicalName(AUDIT_LOG_COLLECTION.name);
    database.exec(`CREATE TRIGGER refuse_audit BEFORE INSERT ON "${table}" BEGIN SELECT RAISE(ABORT, 'refused'); END`);
    return async () => {
      database.exec('DROP TRIGGER refuse_audit');
      database.close();
    };
  },
);

describe('(FerretDB over PostgreSQL)', function () {
  let mongo: MongoTestServer;
  let database: string;
  before(async function () {
    this.timeout(900_000);
    mongo = await sharedMongoTestServer('postgresql');
    database = mongo.freshDatabase();
  });

  describeAuditOrNothing(
    'FerretDB over PostgreSQL',
    () => readyServer({ STORE_URL: mongo.uri(database) }),
    async () => {
      // FerretDB keeps a collection as a table of the database's schema: a trigger makes its inserts fail.
      const [schema, table] = mongo.postgresqlQuery(
        `SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema = '${database}' AND table_name LIKE '${physicalName(AUDIT_LOG_COLLECTION.name)}%'`,
      )[0]!;
      mongo.postgresqlQuery(
        `CREATE OR REPLACE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`,
      );
      mongo.postgresqlQuery(
        `CREATE TRIGGER refuse_audit BEFORE INSERT ON "${schema}"."${table}" FOR EACH ROW EXECUTE FUNCTION refuse_audit()`,
      );
      return async () => {
        mongo.postgresqlQuery(`DROP TRIGGER refuse_audit ON "${schema}"."${table}"`);
      };
    },
  );
});
