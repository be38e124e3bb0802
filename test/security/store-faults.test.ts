import { expect } from 'chai';
import Database from 'better-sqlite3';
import pg from 'pg';
import { createServer, Socket, type Server } from 'node:net';
import { openArbiterStore as openStore } from '../../src/collections.js';
import { StoreUnavailableError } from '../../src/store/index.js';
import { STORE_UNAVAILABLE_FOR_CALLERS } from '../../src/http/errors.js';
import { MongoTestServer } from '../store/mongo-server.js';
import { PostgresTestServer } from '../store/postgres-server.js';
import { clientCredentials, clientToken, confidentialClient, eventually } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * A store that is locked or frozen answers nothing for as long as it lasts. The server must not
 * wait with it: a request that needs the store answers 503 temporarily_unavailable with
 * Retry-After within about five seconds, never a 500 or a hang; /readyz says so within a second
 * (it writes, where a read would still pass); and the node serves again the moment the store does.
 */
describe('Store faults: bounded answers and readiness that writes', function () {
  this.timeout(120_000);
  /** The SQLite tests' lock wait: 1 s instead of the default 5 s, so that each waits it out in a second. */
  const LOCK_WAIT = { STORE_SQLITE_LOCK_WAIT_MS: '1000' };

  describe('SQLite with its write lock held by another connection', function () {
    let server: TestServer;
    let secret: string;
    let file: string;

    before(async function () {
      server = await readyServer(LOCK_WAIT);
      file = server.config.storeUrl.slice('sqlite:'.length);
      secret = await confidentialClient(server, 'locked-out', { scopes: ['read'] });
    });
    after(async function () {
      await server?.close();
    });

    const token = () => clientCredentials(server, 'locked-out', secret, { scope: 'read' });

    it('answers /token 503 with Retry-After within the lock wait, /readyz 503 within a second, and serves again once released', async function () {
      expect((await token()).status, 'a token before the lock').to.equal(200);
      const holder = new Database(file);
      holder.exec('BEGIN IMMEDIATE');
      try {
        const probeStarted = performance.now();
        const ready = await server.request('/readyz');
        const probeMs = performance.now() - probeStarted;
        expect(ready.status, '/readyz while locked').to.equal(503);
        expect(await ready.json()).to.deep.include({ status: 'unavailable', store: 'down' });
        expect(probeMs, '/readyz answers within about a second').to.be.below(2500);

        const started = performance.now();
        const answer = await token();
        const tokenMs = performance.now() - started;
        expect(answer.status, `/token while locked: ${JSON.stringify(answer.body)}`).to.equal(503);
        expect(answer.body.error).to.equal('temporarily_unavailable');
        expect(answer.body.error_description).to.equal(STORE_UNAVAILABLE_FOR_CALLERS);
        expect(answer.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
        expect(tokenMs, '/token answers within the lock wait (and some slack)').to.be.below(8000);
      } finally {
        holder.exec('ROLLBACK');
        holder.close();
      }
      expect((await token()).status, 'a token once the lock is released').to.equal(200);
      expect((await server.request('/readyz')).status, '/readyz once released').to.equal(200);
    });
  });

  // Found 2026-11-29: with the disk full, /readyz said the store was up (its small write still found room)
  // while every token was refused, so a load balancer kept sending this node requests.
  it('says /readyz 503 while writes fail for a full file, and ready again once they do not', async function () {
    const full = await readyServer(LOCK_WAIT);
    // SQLite's own page limit on the server's connection: its writes fail SQLITE_FULL, as on a full disk.
    const db = (full.store as unknown as { db: Database.Database }).db;
    try {
      const secret = await confidentialClient(full, 'full-disk', { scopes: ['read'] });
      const token = () => clientCredentials(full, 'full-disk', secret, { scope: 'read' });
      db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
      const refused = await token();
      expect(refused.status, JSON.stringify(refused.body)).to.equal(503);
      const ready = await full.request('/readyz');
      expect(ready.status, '/readyz while writes fail').to.equal(503);
      expect(await ready.json()).to.include({ store: 'down' });
      db.pragma('max_page_count = 1073741823');
      expect((await token()).status, 'a token once there is room').to.equal(200);
      await eventually(async () => (await full.request('/readyz')).status === 200, 10_000);
    } finally {
      await full.close();
    }
  });

  it('recovers by itself from a lock held during its first requests (a table made on first use), never a 500', async function () {
    const fresh = await readyServer(LOCK_WAIT);
    try {
      const secret = await confidentialClient(fresh, 'first-use', { scopes: ['read'] });
      const token = () => clientCredentials(fresh, 'first-use', secret, { scope: 'read' });
      const holder = new Database(fresh.config.storeUrl.slice('sqlite:'.length));
      holder.exec('BEGIN IMMEDIATE');
      try {
        const started = performance.now();
        const during = await token();
        expect(during.status, `/token while locked: ${JSON.stringify(during.body)}`).to.equal(503);
        expect(performance.now() - started, 'answered within the lock wait (and some slack)').to.be.below(8000);
        expect(during.body.error).to.equal('temporarily_unavailable');
      } finally {
        holder.exec('ROLLBACK');
        holder.close();
      }
      const after = await token();
      expect(after.status, `/token once released: ${JSON.stringify(after.body)}`).to.equal(200);
    } finally {
      await fresh.close();
    }
  });

  describe('a PostgreSQL store frozen with SIGSTOP (its cluster of its own)', function () {
    let postgres: PostgresTestServer;
    let server: TestServer;
    let secret: string;

    let schema: string;
    const logLines: string[] = [];

    before(async function () {
      postgres = await PostgresTestServer.start({ own: true });
      schema = postgres.freshSchema();
      server = await readyServer(
        { STORE_URL: postgres.url(schema), LOG_LEVEL: 'warn' },
        { logStream: { write: (line: string) => void logLines.push(line) } },
      );
      secret = await confidentialClient(server, 'frozen-postgres', { scopes: ['read'] });
    });
    after(async function () {
      await server?.close();
      await postgres?.stop();
    });

    const token = () => clientCredentials(server, 'frozen-postgres', secret, { scope: 'read' });

    it('answers /token and a Bearer API 503 with Retry-After within 5 s, /readyz 503, and serves again once thawed; /metrics shows the pool', async function () {
      expect((await token()).status, 'a token before the freeze').to.equal(200);
      const ssfSecret = await confidentialClient(server, 'frozen-ssf', { scopes: ['ssf.read'] });
      const ssfToken = await clientToken(server, 'frozen-ssf', ssfSecret, { scope: 'ssf.read' });
      expect(
        (await server.request('/ssf/streams', { headers: { Authorization: `Bearer ${ssfToken}` } })).status,
        'a Bearer API before the freeze',
      ).to.equal(200);
      const metrics = await (await server.request('/metrics')).text();
      expect(metrics).to.match(/^arbiter_store_pool_connections\{state="open"\} [1-9]/m);
      expect(metrics).to.match(/^arbiter_store_pool_connections\{state="max"\} 10$/m);
      // The scrape's own ping may be waiting for its connection at that instant.
      expect(metrics).to.match(/^arbiter_store_pool_waiting \d+$/m);
      const frozen = postgres.processes();
      for (const pid of frozen) process.kill(pid, 'SIGSTOP');
      try {
        const started = performance.now();
        const answer = await token();
        const tokenMs = performance.now() - started;
        expect(answer.status, `/token while frozen: ${JSON.stringify(answer.body)}`).to.equal(503);
        expect(answer.body.error).to.equal('temporarily_unavailable');
        expect(answer.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
        expect(tokenMs, '/token answers within 5 s').to.be.below(5000);
        const ready = await server.request('/readyz');
        expect(ready.status, '/readyz while frozen').to.equal(503);
        // An active token presented to Arbiter's own APIs: the store's fault, not the token's (a 401 would end it).
        const streams = await server.request('/ssf/streams', { headers: { Authorization: `Bearer ${ssfToken}` } });
        expect(streams.status, `/ssf/streams while frozen: ${await streams.text()}`).to.equal(503);
        expect(streams.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
        // What an operator needs most now: /metrics answers, and says the store does not.
        const scrape = await server.request('/metrics');
        const scraped = await scrape.text();
        expect(scrape.status, `/metrics while frozen: ${scraped.slice(0, 200)}`).to.equal(200);
        expect(scraped).to.match(/^arbiter_store_ping_seconds -1$/m);
        expect(scraped).to.match(/^arbiter_outbox_pending -1$/m);
      } finally {
        for (const pid of frozen) process.kill(pid, 'SIGCONT');
      }
      let after = await token();
      for (let attempt = 0; after.status !== 200 && attempt < 50; attempt += 1) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        after = await token();
      }
      expect(after.status, `/token once thawed: ${JSON.stringify(after.body)}`).to.equal(200);
    });

    it("answers 503 while another session holds a lock on every table, the log naming the server's statement timeout (found 2026-11-30: the client's read timeout won about two times in three)", async function () {
      expect((await token()).status, 'a token before the lock').to.equal(200);
      const locker = new pg.Client({ connectionString: postgres.url(schema).replace(/[?&]schema=[^&]*/, '') });
      await locker.connect();
      try {
        const { rows } = await locker.query<{ tablename: string }>(
          'SELECT tablename FROM pg_tables WHERE schemaname = $1',
          [schema],
        );
        await locker.query('BEGIN');
        await locker.query(
          `LOCK TABLE ${rows.map(({ tablename }) => `"${schema}"."${tablename}"`).join(', ')} IN ACCESS EXCLUSIVE MODE`,
        );
        const logged = logLines.length;
        const started = performance.now();
        const answer = await token();
        expect(answer.status).to.equal(503);
        // statement_timeout_ms is 2,500 by default; a request makes a few statements, each bounded.
        expect(performance.now() - started).to.be.below(8000);
        const reasons = logLines.slice(logged).filter((line) => line.includes('StoreUnavailableError'));
        expect(reasons.join('\n'), 'the reason logged').to.contain('canceling statement due to statement timeout');
        // The server cancels first, so the client's own read timeout (which drops the connection) never fires.
        expect(reasons.join('\n')).not.to.contain('Query read timeout');
      } finally {
        await locker.query('ROLLBACK').catch(() => undefined);
        await locker.end();
      }
      await eventually(async () => (await token()).status === 200, 10_000);
    });
  });

  describe('a MongoDB store that stops answering (frozen)', function () {
    const mongo = new MongoTestServer();
    let proxy: FreezingProxy;

    before(async function () {
      if (process.env.MONGODB_URI) this.skip(); // the proxy needs a server it can reach directly
      this.timeout(900_000); // the first FerretDB build downloads and compiles Go modules
      await mongo.start();
      proxy = await FreezingProxy.to(new URL(mongo.uri('x')).port);
    });
    after(async function () {
      await proxy?.close();
      await mongo.stop();
    });

    it('rejects an operation that waited for a connection of a full pool with StoreUnavailableError (found 2026-11-30: a 500)', async function () {
      const direct = new URL(mongo.uri(mongo.freshDatabase()));
      direct.port = String(proxy.port);
      direct.searchParams.set('maxPoolSize', '1');
      direct.searchParams.set('waitQueueTimeoutMS', '500');
      const store = await openStore(direct.toString());
      try {
        await store.collection('things').insert({ id: 'before' });
        proxy.freeze();
        const outcome = (operation: Promise<unknown>) =>
          operation.then(
            () => undefined,
            (rejection: unknown) => rejection,
          );
        // The pool's one connection is held by the first, frozen; the second waits for it.
        const holding = outcome(store.collection('things').insert({ id: 'holding' }));
        const waiting = await outcome(store.collection('things').get('before'));
        expect(waiting).to.be.instanceOf(StoreUnavailableError);
        expect((waiting as StoreUnavailableError).reason).to.contain('did not answer in time');
        proxy.thaw();
        await holding;
      } finally {
        proxy.thaw();
        await store.close();
      }
    });

    it('rejects with StoreUnavailableError within the default timeouts, and answers again once thawed', async function () {
      const direct = new URL(mongo.uri(mongo.freshDatabase()));
      direct.port = String(proxy.port);
      const store = await openStore(direct.toString());
      try {
        await store.collection('things').insert({ id: 'before' });
        proxy.freeze();
        const started = performance.now();
        const error = await store
          .collection('things')
          .insert({ id: 'frozen' })
          .then(
            () => undefined,
            (rejection: unknown) => rejection,
          );
        const waitedMs = performance.now() - started;
        expect(error).to.be.instanceOf(StoreUnavailableError);
        expect(waitedMs, 'the driver gave up within its bounded timeouts').to.be.below(12_000);
        // A request makes several calls: once one found the store gone, the next fail at once, not
        // each after its own timeouts (found 2026-11-29: 10 to 15 s before a request's 503).
        const next = performance.now();
        const again = await store
          .collection('things')
          .get('before')
          .then(
            () => undefined,
            (rejection: unknown) => rejection,
          );
        expect(again).to.be.instanceOf(StoreUnavailableError);
        expect(performance.now() - next, 'at once').to.be.below(1000);
        proxy.thaw();
        // Asked again a moment later, it answers.
        await eventually(
          () =>
            store
              .collection('things')
              .upsert({ id: 'after' })
              .then(
                () => true,
                () => false,
              ),
          10_000,
        );
        expect(await store.collection('things').get('after')).to.include({ id: 'after' });
      } finally {
        proxy.thaw();
        await store.close();
      }
    });
  });
});

/**
 * A TCP proxy that can stop passing bytes in both directions while keeping every connection
 * open: what a client sees of a server stopped with SIGSTOP, without stopping the server other
 * tests share. New connections made while frozen are accepted and left silent too.
 */
class FreezingProxy {
  private frozen = false;
  private readonly sockets = new Set<Socket>();
  private readonly held: (() => void)[] = [];

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly target: number,
  ) {}

  static async to(targetPort: string): Promise<FreezingProxy> {
    let proxy: FreezingProxy | undefined;
    const server = createServer((client) => proxy!.accept(client));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    proxy = new FreezingProxy(server, port, Number(targetPort));
    return proxy;
  }

  freeze(): void {
    this.frozen = true;
  }

  thaw(): void {
    this.frozen = false;
    for (const release of this.held.splice(0)) release();
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const connect = () => {
      const server = new Socket();
      server.connect(this.target, '127.0.0.1');
      this.pipe(client, server);
      this.pipe(server, client);
    };
    this.track(client);
    if (this.frozen) this.held.push(connect);
    else connect();
  }

  /** Passes `from`'s bytes to `to`, holding them while frozen. */
  private pipe(from: Socket, to: Socket): void {
    this.track(to);
    from.on('data', (chunk: Buffer) => {
      if (!this.frozen) {
        to.write(chunk);
        return;
      }
      from.pause();
      this.held.push(() => {
        to.write(chunk);
        from.resume();
      });
    });
    from.on('close', () => to.destroy());
    from.on('error', () => to.destroy());
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
  }
}
