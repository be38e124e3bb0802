import type { ChildProcess } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { expect } from 'chai';
import { eventually } from '../support/oauth.js';
import { ADMIN_KEY, freePort } from '../support/server.js';
import { startServerProcess } from '../support/server-process.js';
import { MongoTestServer } from '../store/mongo-server.js';
import { sharedPostgresTestServer } from '../store/postgres-server.js';

/** A store the crashing server runs on: the environment that names it, for as long as the suite runs. */
interface CrashStore {
  name: string;
  /** STORE_URL and the like; none for the default SQLite file in the server's data folder. */
  start(): Promise<Record<string, string>>;
  stop(): Promise<void>;
}

const sqlite: CrashStore = { name: 'SQLite', start: async () => ({}), stop: async () => undefined };

function mongoWire(): CrashStore {
  const mongo = new MongoTestServer();
  return {
    name: 'the MongoDB-wire store',
    async start() {
      await mongo.start();
      return { STORE_URL: mongo.uri(mongo.freshDatabase()) };
    },
    stop: () => mongo.stop(),
  };
}

/** PostgreSQL (a schema of its own): its upserts of one moment share a statement, answered only once it committed. */
const postgresql: CrashStore = {
  name: 'PostgreSQL',
  start: async () => ({ STORE_URL: (await sharedPostgresTestServer()).url() }),
  stop: async () => undefined,
};

/** One initial access token per worker of the burst, so that registrations do not race for one use counter. */
const WORKERS = 8;

for (const store of [sqlite, mongoWire(), postgresql]) crashSafetyOn(store);

/**
 * SIGKILL in the middle of a burst of writes (Admin API creates, token issuance, dynamic
 * registrations): after a restart on the same store, every write that was answered 2xx is
 * there and works, with its audit entry; the killed server's OPA and its config folder do not
 * outlive the restart. The server runs as its own process, with a temporary folder of its own,
 * so that nothing else on the machine is touched.
 */
function crashSafetyOn(store: CrashStore) {
  describe(`crash safety on ${store.name} (SIGKILL during a burst of writes)`, function () {
    this.timeout(180_000);
    let dataDir: string;
    let tempDir: string;
    let port: number;
    let url: string;
    let storeEnv: Record<string, string>;
    let server: ChildProcess | undefined;

    before(async function () {
      this.timeout(900_000); // the first FerretDB build downloads and compiles Go modules
      storeEnv = await store.start();
      dataDir = mkdtempSync(join(tmpdir(), 'arbiter-crash-data-'));
      tempDir = mkdtempSync(join(tmpdir(), 'arbiter-crash-tmp-'));
      port = await freePort();
      url = `http://127.0.0.1:${port}`;
    });

    after(async function () {
      if (server && server.exitCode === null && server.signalCode === null) {
        server.kill('SIGTERM');
        await once(server, 'exit');
      }
      await store.stop();
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(tempDir, { recursive: true, force: true });
    });

    const start = () =>
      startServerProcess({ port, dataDir, env: { TMPDIR: tempDir, AUTH_FAILURE_LIMIT: '1000000', ...storeEnv } });

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
    const form = (path: string, fields: Record<string, string>, headers: Record<string, string>) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(fields).toString(),
      });
    const register = (initialAccessToken: string, requestId: string) =>
      fetch(`${url}/register`, {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${initialAccessToken}`,
          'Content-Type': 'application/json',
          'X-Request-ID': requestId,
        },
        body: JSON.stringify({ redirect_uris: ['https://crash.example.test/cb'], token_endpoint_auth_method: 'none' }),
      });
    const readRegistration = (clientId: string, registrationAccessToken: string) =>
      fetch(`${url}/register/${encodeURIComponent(clientId)}`, {
        headers: { Authorization: `Bearer ${registrationAccessToken}` },
      });
    const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
    const opaFolders = () => readdirSync(tempDir).filter((name) => name.startsWith('arbiter-opa-'));

    it('keeps every acknowledged write and its audit entry, and leaves no OPA of the dead server behind', async function () {
      server = await start();
      const hash = bcrypt.hashSync('crash-secret', 4);
      expect(
        (
          await admin('POST', '/clients', {
            clientId: 'crash-client',
            clientType: 'confidential',
            clientSecret: hash,
            scopes: ['read'],
          })
        ).status,
      ).to.equal(201);
      expect(
        (
          await admin('POST', '/clients', {
            clientId: 'crash-rs',
            clientType: 'confidential',
            clientSecret: hash,
            scopes: ['introspection'],
          })
        ).status,
      ).to.equal(201);
      // Registration is closed by default: initial access tokens let these through.
      const initialAccessTokens: string[] = [];
      for (let index = 0; index < WORKERS; index += 1) {
        const issued = await admin('POST', '/initial-access-tokens', { name: `crash-worker-${index}` });
        expect(issued.status).to.equal(201);
        initialAccessTokens.push(((await issued.json()) as { token: string }).token);
      }
      const firstFolder = opaFolders()[0]!;
      const firstOpa = Number(readFileSync(join(tempDir, firstFolder, 'opa.pid'), 'utf8'));

      const createdClients: string[] = [];
      const issuedTokens: string[] = [];
      const registrations: { client_id: string; registration_access_token: string }[] = [];
      const acknowledged: string[] = [];
      let stop = false;
      let sequence = 0;
      const worker = async (initialAccessToken: string) => {
        while (!stop) {
          const n = (sequence += 1);
          const requestId = `crash-${n}`;
          try {
            if (n % 3 === 2) {
              const response = await register(initialAccessToken, requestId);
              if (response.status === 201) {
                registrations.push((await response.json()) as { client_id: string; registration_access_token: string });
                acknowledged.push(requestId);
              }
            } else if (n % 3 === 0) {
              const response = await admin(
                'POST',
                '/clients',
                { clientId: `burst-${n}`, clientType: 'confidential', clientSecret: hash, scopes: ['read'] },
                requestId,
              );
              if (response.status === 201) {
                createdClients.push(`burst-${n}`);
                acknowledged.push(requestId);
              }
            } else {
              const response = await form(
                '/token',
                { grant_type: 'client_credentials', scope: 'read' },
                { Authorization: basic('crash-client', 'crash-secret'), 'X-Request-ID': requestId },
              );
              if (response.status === 200) {
                issuedTokens.push(((await response.json()) as { access_token: string }).access_token);
                acknowledged.push(requestId);
              }
            }
          } catch {
            // The server died under this request: it was not acknowledged.
          }
        }
      };
      const workers = initialAccessTokens.map(worker);
      // Kill once a good number of writes were acknowledged, in the middle of the burst.
      while (acknowledged.length < 150) await new Promise((resolve) => setTimeout(resolve, 20));
      server.kill('SIGKILL');
      await once(server, 'exit');
      stop = true;
      await Promise.all(workers);

      server = await start();
      expect(registrations.length, 'registrations acknowledged before the kill').to.be.above(0);
      await eachInLanes(createdClients, async (clientId) => {
        expect((await admin('GET', `/clients/${clientId}`)).status, clientId).to.equal(200);
      });
      await eachInLanes(registrations, async ({ client_id: clientId, registration_access_token: token }) => {
        const read = await readRegistration(clientId, token);
        expect(read.status, `registration ${clientId}`).to.equal(200);
        expect(((await read.json()) as { client_id: string }).client_id).to.equal(clientId);
      });
      const rs = (await (
        await form(
          '/token',
          { grant_type: 'client_credentials', scope: 'introspection' },
          { Authorization: basic('crash-rs', 'crash-secret') },
        )
      ).json()) as { access_token: string };
      await eachInLanes(issuedTokens, async (token) => {
        const answer = (await (
          await form('/introspect', { token }, { Authorization: `Bearer ${rs.access_token}` })
        ).json()) as { active: boolean };
        expect(answer.active).to.equal(true);
      });
      const audited = new Set<string>();
      for (let page = 0; ; page += 1) {
        const body = (await (await admin('GET', `/audit-logs?size=500&page=${page}`)).json()) as {
          content: { requestId: string | null }[];
          totalPages: number;
        };
        for (const entry of body.content) if (entry.requestId) audited.add(entry.requestId);
        if (page + 1 >= body.totalPages) break;
      }
      expect(acknowledged.filter((requestId) => !audited.has(requestId))).to.deep.equal([]);

      // The dead server's OPA was stopped by the restart, and its folder removed. Killed, it may
      // linger a moment as a zombie until init reaps it: dead all the same.
      await eventually(async () => !running(firstOpa), 10_000);
      expect(existsSync(join(tempDir, firstFolder))).to.equal(false);
      expect(opaFolders()).to.have.length(1);
    });

    it('finishes a request in flight on SIGTERM, with its audit entry, then exits', async function () {
      if (!server || server.exitCode !== null || server.signalCode !== null) server = await start();
      const running = server;
      const body = JSON.stringify({
        clientId: 'sigterm-client',
        clientType: 'confidential',
        clientSecret: bcrypt.hashSync('x', 4),
        scopes: ['read'],
      });
      const answered = new Promise<number>((resolve, reject) => {
        const request = httpRequest(
          `${url}/admin/api/clients`,
          {
            method: 'POST',
            headers: {
              'X-Admin-API-Key': ADMIN_KEY,
              'Content-Type': 'application/json',
              'X-Request-ID': 'sigterm-1',
              'Transfer-Encoding': 'chunked',
            },
          },
          (response) => {
            response.resume();
            resolve(response.statusCode ?? 0);
          },
        );
        request.on('error', reject);
        // Half the body now; SIGTERM while the server waits for the rest; then the rest.
        request.write(body.slice(0, 20));
        setTimeout(() => {
          running.kill('SIGTERM');
          setTimeout(() => request.end(body.slice(20)), 300);
        }, 300);
      });
      expect(await answered).to.equal(201);
      const [code] = (await once(running, 'exit')) as [number | null];
      expect(code).to.equal(0);
      server = await start();
      expect((await admin('GET', '/clients/sigterm-client')).status).to.equal(200);
      const entries = (
        (await (await admin('GET', '/audit-logs?endpoint=/admin/api/clients&size=50&sort=id,desc')).json()) as {
          content: { requestId: string | null }[];
        }
      ).content;
      expect(entries.map((entry) => entry.requestId)).to.include('sigterm-1');
    });
  });
}

/** Runs `check` on every item, a few at a time: the checks after a restart are independent reads. */
async function eachInLanes<T>(items: T[], check: (item: T) => Promise<void>, lanes = 8): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const item = items[next]!;
      next += 1;
      await check(item);
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
}

/** True while `pid` is a process that still runs (not gone, and not a zombie awaiting its reaper). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  return !/^\d+ \(.*\) Z /.test(stat);
}
