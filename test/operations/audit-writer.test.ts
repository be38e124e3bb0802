import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import bcrypt from 'bcryptjs';
import { expect } from 'chai';
import { basic, clientCredentials, confidentialClient, FORM } from '../support/oauth.js';
import { ADMIN_KEY, freePort, readyServer, type TestServer } from '../support/server.js';
import { startServerProcess } from '../support/server-process.js';
import { MongoTestServer } from '../store/mongo-server.js';

interface Entry {
  id: number;
  endpoint: string;
  requestId: string | null;
  createdAt: string;
  requestSummary: { status: number };
}

/** Every audit entry of every tenant, oldest first, read page by page through the Admin API. */
async function allEntries(baseUrl: string): Promise<Entry[]> {
  const entries: Entry[] = [];
  for (let page = 0; ; page += 1) {
    const response = await fetch(`${baseUrl}/admin/api/audit-logs?allTenants=true&size=1000&sort=id,asc&page=${page}`, {
      headers: { 'X-Admin-API-Key': ADMIN_KEY },
    });
    const body = (await response.json()) as { content: Entry[]; totalPages: number };
    entries.push(...body.content);
    if (page + 1 >= body.totalPages) return entries;
  }
}

/** The entries with each request id, for the ids asked about. */
function byRequestId(entries: Entry[], requestIds: string[]): Map<string, Entry[]> {
  const wanted = new Map(requestIds.map((requestId) => [requestId, [] as Entry[]]));
  for (const entry of entries) if (entry.requestId) wanted.get(entry.requestId)?.push(entry);
  return wanted;
}

/**
 * The audit log writes the entries of concurrent requests in batches (one store write each), and
 * still answers a request only once its entry is stored: a burst gets one entry per request (on
 * SQLite and on a MongoDB-wire store), neither SIGTERM during a burst nor SIGKILL at the first
 * answer loses the entry of an answered request, and a failed audit write is logged and answered
 * 503 instead of what the request produced (issue 34 item 1: no answer without its entry).
 */
describe('batched audit writer', function () {
  this.timeout(180_000);

  for (const storeKind of ['sqlite', 'mongodb'] as const) describeBurst(storeKind);

  describe('a failing audit write', function () {
    let server: TestServer;
    let secret: string;
    const lines: string[] = [];

    before(async function () {
      // Its own server: the test breaks its audit writes and reads its log.
      server = await readyServer({ LOG_LEVEL: 'error' }, { logStream: { write: (line: string) => lines.push(line) } });
      secret = await confidentialClient(server, 'unaudited-client', { scopes: ['read'] });
    });

    after(async function () {
      await server?.close();
    });

    /** Makes the store refuse audit entries, and only them, as a disk or a server might. */
    function refuseAuditEntries(refuse: boolean): void {
      const db = new Database(server.config.storeUrl.slice('sqlite:'.length));
      try {
        db.pragma('busy_timeout = 5000');
        db.exec(
          refuse
            ? `CREATE TRIGGER refuse_audit BEFORE INSERT ON c_audit_logs BEGIN SELECT RAISE(ABORT, 'audit entries refused by the test'); END`
            : 'DROP TRIGGER refuse_audit',
        );
      } finally {
        db.close();
      }
    }

    it('answers 503 instead (success and refusal alike), logs why without secrets, and audits again once the store takes entries', async function () {
      refuseAuditEntries(true);
      try {
        const token = await clientCredentials(
          server,
          'unaudited-client',
          secret,
          { scope: 'read' },
          { 'X-Request-ID': 'unaudited-token' },
        );
        expect(token.status, JSON.stringify(token.body)).to.equal(503);
        expect(token.body.error).to.equal('temporarily_unavailable');
        expect(token.headers.get('retry-after')).to.match(/^\d+$/);
        expect(token.body).to.not.have.property('access_token');
        expect(token.body.error_description).to.contain('withdrawn and not sent');
        const refused = await clientCredentials(
          server,
          'unaudited-client',
          'wrong-secret-value',
          { scope: 'read' },
          { 'X-Request-ID': 'unaudited-refusal' },
        );
        expect(refused.status).to.equal(503);
        expect(refused.body.error).to.equal('temporarily_unavailable');
        const created = await server.admin(
          'POST',
          '/clients',
          { clientId: 'created-unaudited', clientType: 'public', redirectUris: ['https://unaudited.example.test/cb'] },
          { 'X-Request-ID': 'unaudited-create' },
        );
        expect(created.status, JSON.stringify(created.body)).to.equal(503);
        expect(created.body.error_description, 'said as it is').to.contain('what it changed is stored');
        const concurrent = await Promise.all(
          Array.from({ length: 20 }, (_, n) => server.request(`/admin/api/subjects/unaudited-${n}`, { admin: true })),
        );
        expect(concurrent.map((answer) => answer.status)).to.deep.equal(Array(20).fill(503));
      } finally {
        refuseAuditEntries(false);
      }

      const batchFailures = lines.filter((line) => line.includes('audit batch of'));
      expect(batchFailures.length, 'one line per failed batch').to.be.at.least(4).and.at.most(23);
      expect(batchFailures[0]).to.contain('audit entries refused by the test');
      expect(
        lines.filter((line) => line.includes('audit write failed')),
        'one line per request',
      ).to.have.length(23);
      const logged = lines.join('\n');
      for (const secretValue of [
        secret,
        'wrong-secret-value',
        ADMIN_KEY,
        Buffer.from(`unaudited-client:${secret}`).toString('base64'),
      ])
        expect(logged).not.to.contain(secretValue);
      expect(logged).not.to.contain('    at ');

      expect(
        (await server.admin('GET', '/clients/created-unaudited')).status,
        'an Admin write is not undone (only credentials are withdrawn)',
      ).to.equal(200);
      const after = await clientCredentials(
        server,
        'unaudited-client',
        secret,
        { scope: 'read' },
        { 'X-Request-ID': 'audited-again' },
      );
      expect(after.status).to.equal(200);
      const found = byRequestId(await allEntries(server.url), [
        'unaudited-token',
        'unaudited-refusal',
        'unaudited-create',
        'audited-again',
      ]);
      expect(Object.fromEntries([...found].map(([requestId, entries]) => [requestId, entries.length]))).to.deep.equal({
        'unaudited-token': 0,
        'unaudited-refusal': 0,
        'unaudited-create': 0,
        'audited-again': 1,
      });
    });
  });

  describe('stopping during a burst', function () {
    let dataDir: string;
    let port: number;
    let url: string;
    let child: ChildProcess | undefined;

    before(async function () {
      dataDir = mkdtempSync(join(tmpdir(), 'arbiter-audit-writer-'));
      port = await freePort();
      url = `http://127.0.0.1:${port}`;
    });

    after(async function () {
      if (child && child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
      rmSync(dataDir, { recursive: true, force: true });
    });

    // What the server logged at warn and above: why it stopped as it did, when it did not exit cleanly.
    let output = '';
    const start = (workers = '1') => {
      output = '';
      return startServerProcess({
        port,
        dataDir,
        env: { AUTH_FAILURE_LIMIT: '1000000', WORKERS: workers, LOG_LEVEL: 'warn' },
        onOutput: (chunk) => (output += chunk),
      });
    };
    const admin = (method: string, path: string, body?: unknown, requestId?: string) =>
      fetch(`${url}/admin/api${path}`, {
        method,
        headers: {
          'X-Admin-API-Key': ADMIN_KEY,
          'Content-Type': 'application/json',
          ...(requestId ? { 'X-Request-ID': requestId } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });

    // With WORKERS=2 the primary has both workers drain, each writing the entries of what it answered.
    for (const workerCount of ['1', '2'])
      it(`exits cleanly, and every request answered before it stopped has its audit entry (WORKERS=${workerCount})`, async function () {
        if (child && child.exitCode === null && child.signalCode === null) {
          child.kill('SIGKILL');
          await once(child, 'exit');
        }
        child = await start(workerCount);
        const clientId = `sigterm-burst-w${workerCount}`;
        const running = child;
        const hash = bcrypt.hashSync('sigterm-secret', 4);
        expect(
          (
            await admin('POST', '/clients', {
              clientId,
              clientType: 'confidential',
              clientSecret: hash,
              scopes: ['read'],
            })
          ).status,
        ).to.equal(201);

        const acknowledged: string[] = [];
        const unexpected: string[] = [];
        let sequence = 0;
        let exited = false;
        const exit = once(running, 'exit').then((result) => {
          exited = true;
          return result as [number | null, NodeJS.Signals | null];
        });
        const worker = async () => {
          while (!exited) {
            const n = (sequence += 1);
            const requestId = `sigterm-burst-w${workerCount}-${n}`;
            try {
              const response =
                n % 2 === 0
                  ? await admin('GET', `/subjects/${requestId}`, undefined, requestId)
                  : await fetch(`${url}/token`, {
                      method: 'POST',
                      headers: {
                        ...FORM,
                        Authorization: basic(clientId, 'sigterm-secret'),
                        'X-Request-ID': requestId,
                      },
                      body: 'grant_type=client_credentials&scope=read',
                    });
              await response.arrayBuffer();
              acknowledged.push(requestId);
              if (response.status !== (n % 2 === 0 ? 404 : 200)) unexpected.push(`${requestId}: ${response.status}`);
            } catch {
              // The server stopped taking requests: this one was not answered.
              await new Promise((resolve) => setImmediate(resolve));
            }
          }
        };
        const workers = Array.from({ length: 12 }, worker);
        while (acknowledged.length < 200) await new Promise((resolve) => setTimeout(resolve, 10));
        running.kill('SIGTERM');
        const [code, signal] = await exit;
        await Promise.all(workers);
        expect({ code, signal }, `a clean exit: ${output.slice(-3000)}`).to.deep.equal({ code: 0, signal: null });
        expect(unexpected).to.deep.equal([]);

        child = await start();
        const entries = await allEntries(url);
        const found = byRequestId(entries, acknowledged);
        expect(
          acknowledged.filter((requestId) => found.get(requestId)!.length !== 1),
          'answered requests without exactly one entry',
        ).to.deep.equal([]);
        const ids = entries.map((entry) => entry.id);
        expect(new Set(ids).size, 'unique ids across the restart').to.equal(ids.length);
      });

    it('has the entry of every answered request even when SIGKILL follows the first answer at once', async function () {
      if (!child || child.exitCode !== null || child.signalCode !== null) child = await start();
      const running = child;
      const exited = once(running, 'exit');
      const answered: string[] = [];
      const requests = Array.from({ length: 30 }, (_, n) => {
        const requestId = `killed-at-answer-${n}`;
        return new Promise<void>((resolve) => {
          const request = httpRequest(
            `${url}/admin/api/subjects/${requestId}`,
            { headers: { 'X-Admin-API-Key': ADMIN_KEY, 'X-Request-ID': requestId } },
            (response) => {
              // The status line came: the request was answered. Killed here, before the next event.
              running.kill('SIGKILL');
              answered.push(requestId);
              response.resume();
              resolve();
            },
          );
          request.on('error', () => resolve());
          request.end();
        });
      });
      await Promise.all(requests);
      await exited;
      expect(answered.length).to.be.at.least(1);

      child = await start();
      const found = byRequestId(await allEntries(url), answered);
      expect(
        answered.filter((requestId) => found.get(requestId)!.length !== 1),
        'answered requests without exactly one entry',
      ).to.deep.equal([]);
    });
  });
});

/** A burst through a server on the given store: SQLite writes a batch at once, MongoDB gathers the next batch during a round trip. */
function describeBurst(storeKind: 'sqlite' | 'mongodb'): void {
  describe(`a burst of concurrent requests (${storeKind})`, function () {
    const mongo = new MongoTestServer();
    let server: TestServer;
    let secret: string;

    before(async function () {
      this.timeout(900_000); // the first FerretDB build downloads and compiles Go modules
      const env: Record<string, string> = {};
      if (storeKind === 'mongodb') {
        await mongo.start();
        env.STORE_URL = mongo.uri(mongo.freshDatabase());
      }
      // Its own server: the test counts every audit entry of the burst.
      server = await readyServer(env);
      secret = await confidentialClient(server, 'burst-client', { scopes: ['read'] });
    });

    after(async function () {
      await server?.close();
      if (storeKind === 'mongodb') await mongo.stop();
    });

    it('gets one entry per request, with its request id and status, unique ids rising in the order the requests were answered', async function () {
      const requests = Array.from({ length: 150 }, (_, n) => {
        const requestId = `burst-${n}`;
        if (n % 3 === 0) {
          return clientCredentials(
            server,
            'burst-client',
            secret,
            { scope: 'read' },
            { 'X-Request-ID': requestId },
          ).then((answer) => ({ requestId, endpoint: '/token', status: answer.status }));
        }
        const endpoint = `/admin/api/subjects/burst-subject-${n}`;
        return server
          .request(endpoint, { admin: true, headers: { 'X-Request-ID': requestId } })
          .then(async (answer) => {
            await answer.arrayBuffer();
            return { requestId, endpoint, status: answer.status };
          });
      });
      const answered = await Promise.all(requests);
      expect(
        answered.filter((answer) => answer.endpoint === '/token').every((answer) => answer.status === 200),
      ).to.equal(true);
      expect(
        answered.filter((answer) => answer.endpoint !== '/token').every((answer) => answer.status === 404),
      ).to.equal(true);

      const entries = await allEntries(server.url);
      const found = byRequestId(
        entries,
        answered.map((answer) => answer.requestId),
      );
      for (const { requestId, endpoint, status } of answered) {
        const mine = found.get(requestId)!;
        expect(mine, requestId).to.have.length(1);
        expect(mine[0]!.endpoint, requestId).to.equal(endpoint);
        expect(mine[0]!.requestSummary.status, requestId).to.equal(status);
      }
      const ids = entries.map((entry) => entry.id);
      expect(new Set(ids).size, 'unique ids').to.equal(ids.length);
      // Sorted by id, the entries are in the order they were appended, so createdAt never goes back.
      const times = entries.map((entry) => entry.createdAt);
      expect(times).to.deep.equal([...times].sort());
    });

    it('has the entry of a request stored by the time its answer arrives', async function () {
      for (let n = 0; n < 5; n += 1) {
        const endpoint = `/admin/api/subjects/answered-${n}`;
        expect(
          (await server.request(endpoint, { admin: true, headers: { 'X-Request-ID': `answered-${n}` } })).status,
        ).to.equal(404);
        const { body } = await server.admin('GET', `/audit-logs?endpoint=${encodeURIComponent(endpoint)}`);
        expect(body.content.map((entry: Entry) => entry.requestId)).to.deep.equal([`answered-${n}`]);
      }
    });
  });
}
