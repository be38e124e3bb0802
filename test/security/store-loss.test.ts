import { expect } from 'chai';
import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from 'koa';
import { pino } from 'pino';
import { jsonErrors, STORE_UNAVAILABLE_FOR_CALLERS } from '../../src/http/errors.js';
import { openArbiterStore as openStore } from '../../src/collections.js';
import { StoreUnavailableError, type Store } from '../../src/store/index.js';
import { MongoTestServer } from '../store/mongo-server.js';
import { basic, confidentialClient, postForm } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

const COMPANIONS = ['', '-wal', '-shm'];

/**
 * SQLite keeps writing to the files it has open: once the database file is deleted, renamed
 * or replaced, writes used to be acknowledged and then lost at the next restart. The server
 * must notice instead: /healthz and every endpoint that needs the store answer 503
 * temporarily_unavailable, and no write is acknowledged that the file at the path does not hold.
 */
describe('Store loss', function () {
  describe('a running server', function () {
    let server: TestServer;
    let secret: string;
    let file: string;

    beforeEach(async function () {
      // A server of its own for each test: each one breaks the store.
      server = await readyServer();
      file = server.config.storeUrl.slice('sqlite:'.length);
      secret = await confidentialClient(server, 'keeper', { scopes: ['read'] });
      expect((await clientCredentials()).status, 'a token before the loss').to.equal(200);
    });

    afterEach(async function () {
      await server?.close();
    });

    const clientCredentials = () =>
      postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', scope: 'read' },
        { Authorization: basic('keeper', secret) },
      );

    /** /healthz, an Admin API write and a token request all answer 503 temporarily_unavailable. */
    async function expectUnavailable(reason: RegExp, clientId: string): Promise<void> {
      const health = await server.request('/healthz');
      expect(health.status, '/healthz').to.equal(503);
      expect(await health.json()).to.deep.include({ status: 'unavailable', store: 'down' });

      const created = await server.admin('POST', '/clients', {
        clientId,
        clientType: 'public',
        redirectUris: ['https://lost.example.test/cb'],
      });
      expect(created.status, `Admin POST: ${JSON.stringify(created.body)}`).to.equal(503);
      expect(created.body.error).to.equal('temporarily_unavailable');
      expect(created.body.error_description).to.match(reason);

      // A protocol caller is told the store is unavailable, not where its file is (the log says).
      const token = await clientCredentials();
      expect(token.status, `/token: ${JSON.stringify(token.body)}`).to.equal(503);
      expect(token.body.error).to.equal('temporarily_unavailable');
      expect(token.body.error_description).to.equal(STORE_UNAVAILABLE_FOR_CALLERS);
      expect(JSON.stringify(token.body)).not.to.contain(file);
    }

    it('answers 503 once the database file is deleted, and still when another SQLite file takes its place', async function () {
      for (const suffix of COMPANIONS) rmSync(`${file}${suffix}`, { force: true });
      await expectUnavailable(/database file .* is missing/, 'lost-after-delete');

      const other = new Database(file);
      other.exec('CREATE TABLE other (value TEXT)');
      other.close();
      await expectUnavailable(/database file .* was replaced/, 'lost-after-replace');
    });

    it('answers 503 while the files are renamed away, stores nothing meanwhile, and serves again once they are back', async function () {
      for (const suffix of COMPANIONS) renameSync(`${file}${suffix}`, `${file}.moved${suffix}`);
      await expectUnavailable(/database file .* is missing/, 'lost-while-away');

      for (const suffix of COMPANIONS) renameSync(`${file}.moved${suffix}`, `${file}${suffix}`);
      expect((await server.request('/healthz')).status, 'healthy again').to.equal(200);
      expect(
        (await server.admin('GET', '/clients/lost-while-away')).status,
        'the refused write was not stored',
      ).to.equal(404);
      expect(
        (
          await server.admin('POST', '/clients', {
            clientId: 'after-return',
            clientType: 'public',
            redirectUris: ['https://back.example.test/cb'],
          })
        ).status,
      ).to.equal(201);
      expect((await clientCredentials()).status).to.equal(200);
    });
  });

  describe('the SQLite store', function () {
    const dir = mkdtempSync(join(tmpdir(), 'arbiter-store-loss-'));
    let files = 0;
    let store: Store | undefined;
    let file: string;

    beforeEach(async function () {
      file = join(dir, `store-${++files}.db`);
      store = await openStore(`sqlite:${file}`);
      await store.collection('things').insert({ id: 'kept' });
    });
    afterEach(async function () {
      await store?.close();
    });
    after(function () {
      rmSync(dir, { recursive: true, force: true });
    });

    it('rejects writes, reads and pings with StoreUnavailableError once its file is gone', async function () {
      const things = store!.collection('things');
      for (const suffix of COMPANIONS) rmSync(`${file}${suffix}`);
      for (const operation of [
        () => things.insert({ id: 'new' }),
        () => things.upsert({ id: 'kept', changed: true }),
        () => things.update('kept', { changed: true }),
        () => things.delete('kept'),
        () => things.get('kept'),
        () => store!.nextSequence('n'),
        () => store!.ping(),
      ]) {
        const error = await operation().then(
          () => undefined,
          (rejection: unknown) => rejection,
        );
        expect(error, operation.toString()).to.be.instanceOf(StoreUnavailableError);
        expect((error as StoreUnavailableError).reason).to.match(/is missing/);
      }
    });

    it('refuses to touch a -shm, -wal or database file made immutable (chattr +i) instead of dying of SIGBUS', async function () {
      const things = store!.collection('things');
      for (const suffix of ['-shm', '-wal', '']) {
        const path = `${file}${suffix}`;
        if (!chattr('+i', path)) this.skip(); // needs CAP_LINUX_IMMUTABLE and a file system with the flag
        try {
          const write = await things.upsert({ id: 'kept', value: 'x'.repeat(5000) }).then(
            () => undefined,
            (error: unknown) => error,
          );
          expect(write, `write with ${path} immutable`).to.be.instanceOf(StoreUnavailableError);
          expect((write as StoreUnavailableError).reason)
            .to.contain(path)
            .and.match(/cannot be written \(EPERM/);
          expect(
            await store!.ping().then(
              () => 'up',
              () => 'down',
            ),
          ).to.equal('down');
        } finally {
          chattr('-i', path);
        }
        await things.upsert({ id: 'kept', value: 'writable again' });
      }
      expect(await things.get('kept')).to.deep.equal({ id: 'kept', value: 'writable again' });
    });
  });

  describe('the MongoDB store', function () {
    const mongo = new MongoTestServer();

    before(async function () {
      if (process.env.MONGODB_URI) this.skip(); // a shared server cannot be stopped by this test
      this.timeout(900_000); // the first FerretDB build downloads and compiles Go modules
      await mongo.start();
    });
    after(async function () {
      await mongo.stop();
    });

    it('rejects with StoreUnavailableError once the server is gone', async function () {
      const store = await openStore(`${mongo.uri(mongo.freshDatabase())}?serverSelectionTimeoutMS=500`);
      try {
        await store.collection('things').insert({ id: 'kept' });
        await mongo.stop();
        const error = await store
          .collection('things')
          .insert({ id: 'new' })
          .then(
            () => undefined,
            (rejection: unknown) => rejection,
          );
        expect(error).to.be.instanceOf(StoreUnavailableError);
        expect((error as StoreUnavailableError).reason).to.match(/MongoDB store cannot be reached/);
        expect(
          await store.ping().then(
            () => 'up',
            () => 'down',
          ),
        ).to.equal('down');
      } finally {
        await store.close();
      }
    });
  });

  describe('the JSON error handler', function () {
    it('answers StoreUnavailableError with 503 temporarily_unavailable and logs one line with the reason, without a stack', async function () {
      const lines: string[] = [];
      const log = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
      const ctx = { path: '/admin/api/clients', method: 'POST', state: {} } as unknown as Context & { body: any };
      await jsonErrors(log)(ctx, async () => {
        throw new StoreUnavailableError("the store's database file /data/arbiter.db is missing");
      });
      expect(ctx.status).to.equal(503);
      expect(ctx.body).to.deep.equal({
        error: 'temporarily_unavailable',
        error_description: "the store's database file /data/arbiter.db is missing",
      });
      expect(lines).to.have.length(1);
      const entry = JSON.parse(lines[0]!);
      expect(entry).to.include({
        level: 50,
        msg: "store unavailable: the store's database file /data/arbiter.db is missing",
        path: '/admin/api/clients',
      });
      expect(lines[0]).not.to.contain('    at ');
    });
  });
});

/** Sets or clears the immutable flag; false when this system does not allow it. */
function chattr(flag: '+i' | '-i', path: string): boolean {
  if (!existsSync(path)) return false;
  try {
    execFileSync('chattr', [flag, path], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
