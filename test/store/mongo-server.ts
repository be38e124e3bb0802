/**
 * The MongoDB server behind the MongoDB-wire tests and bench:scale: the one named by MONGODB_URI
 * when set, otherwise a FerretDB 1.24 started for this run on a free loopback port
 * (scripts/ferretdb.sh) and stopped afterwards, over SQLite (the quick default) or over
 * PostgreSQL (`backend: 'postgresql'`, or FERRETDB_BACKEND=postgresql: a throwaway cluster of
 * Debian's PostgreSQL, scripts/postgresql.sh). That FerretDB applies conditional writes
 * atomically through the proxy in front of it (see concurrencyGapOf).
 */
import { spawn, execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { MongoClient } from 'mongodb';
import { openArbiterStore as openStore } from '../../src/collections.js';
import type { Store } from '../../src/store/types.js';
import { freePort, sharedFixture } from '../support/server.js';

const SCRIPTS = join(dirname(fileURLToPath(import.meta.url)), '../../scripts');
const FERRETDB_SCRIPT = join(SCRIPTS, 'ferretdb.sh');
const POSTGRESQL_SCRIPT = join(SCRIPTS, 'postgresql.sh');
const FERRETDB_MODULE = join(dirname(fileURLToPath(import.meta.url)), '../support/ferretdb/go.mod');
/** PostgreSQL's initdb and start come first on that backend. */
const STARTUP_DEADLINE_MS = { sqlite: 30_000, postgresql: 90_000 };

/** See MongoTestServer.proxyStats. */
export interface ProxyStats {
  serialised: Record<string, number>;
  exclusive: number;
  waitedSeconds: number;
}

/** What FerretDB keeps its data in. */
export type FerretDbBackend = 'sqlite' | 'postgresql';

export interface MongoTestServerOptions {
  /** The backend of the FerretDB started when MONGODB_URI is not set; default FERRETDB_BACKEND, else sqlite. */
  backend?: FerretDbBackend;
}

/**
 * One started MongoTestServer over `backend` for every test file of the run that asks for it
 * (closed by the root hook, test/support/root.ts): PostgreSQL's initdb and start are paid once.
 * Files keep apart through databases of their own (freshDatabase); none calls stop().
 */
export function sharedMongoTestServer(backend: FerretDbBackend): Promise<MongoTestServer> {
  return sharedFixture(`mongo-test-server ${backend}`, async () => {
    const server = new MongoTestServer({ backend });
    try {
      await server.start();
    } catch (error) {
      await server.stop();
      throw error;
    }
    return Object.assign(server, { close: () => server.stop() });
  });
}

/** FerretDB over PostgreSQL where PostgreSQL is installed, else over SQLite (what the multi-node tests run on). */
export function preferredBackend(): FerretDbBackend {
  return postgresqlInstalled() ? 'postgresql' : 'sqlite';
}

export class MongoTestServer {
  /** Why this server's conditional writes are not atomic, when they are not (see ConformanceOptions). */
  concurrencyGap: string | undefined;
  /** The FerretDB version when the server is FerretDB rather than MongoDB. */
  ferretdbVersion: string | undefined;
  /** The backend of the FerretDB started here; undefined with MONGODB_URI. */
  readonly backend: FerretDbBackend | undefined;
  private baseUri = '';
  private ferretdb: FerretDbProcess | undefined;
  private readonly runId = `arbiter_test_${process.pid}_${Date.now().toString(36)}`;
  private readonly databases: string[] = [];

  constructor(options: MongoTestServerOptions = {}) {
    this.backend = process.env.MONGODB_URI
      ? undefined
      : (options.backend ?? (process.env.FERRETDB_BACKEND === 'postgresql' ? 'postgresql' : 'sqlite'));
  }

  async start(): Promise<void> {
    if (this.backend) {
      this.ferretdb = await FerretDbProcess.start(this.backend);
      this.baseUri = this.ferretdb.uri;
    } else {
      this.baseUri = process.env.MONGODB_URI!;
    }
    this.ferretdbVersion = await ferretdbVersionOf(this.baseUri);
    // Ours runs behind the proxy of test/support/ferretdb/proxy.go, which serialises the writes it must.
    this.concurrencyGap = this.ferretdb ? undefined : concurrencyGapOf(this.ferretdbVersion);
  }

  /**
   * FerretDB itself, without the proxy in front of it (its Unix socket), for the test that finds
   * out what the proxy must serialise; undefined with MONGODB_URI.
   */
  directUri(database: string): string | undefined {
    return this.ferretdb && `mongodb://${encodeURIComponent(this.ferretdb.socket)}/${database}`;
  }

  /** The processes of the FerretDB started here, for CPU accounting: FerretDB's (its script's, on PostgreSQL) and PostgreSQL's postmaster. */
  processIds(): { ferretdb?: number; postgresql?: number } {
    if (!this.ferretdb) return {};
    return { ferretdb: this.ferretdb.pid, postgresql: this.ferretdb.postmasterPid() };
  }

  /**
   * What the proxy in front of the FerretDB started here has serialised so far (its proxy-stats.json,
   * written every second): commands by name, how many took the exclusive lock, the seconds they
   * waited for their locks in all. Undefined with MONGODB_URI, or before the first write of the file.
   */
  proxyStats(): ProxyStats | undefined {
    if (!this.ferretdb) return undefined;
    try {
      return JSON.parse(readFileSync(join(this.ferretdb.dataDirectory, 'proxy-stats.json'), 'utf8')) as ProxyStats;
    } catch {
      return undefined;
    }
  }

  /** Runs one SQL statement on the PostgreSQL cluster under the FerretDB started here (bench:scale's statement statistics); its rows, tab-separated. */
  postgresqlQuery(statement: string): string[][] {
    if (this.backend !== 'postgresql' || !this.ferretdb) throw new Error('no PostgreSQL under this store');
    const output = execFileSync(
      'bash',
      [POSTGRESQL_SCRIPT, 'sql', join(this.ferretdb.dataDirectory, 'pg'), statement],
      {
        encoding: 'utf8',
      },
    );
    return output
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('\t'));
  }

  /** The server in words, for reports: `FerretDB v1.24.2 over PostgreSQL 15.14`, or `MongoDB 8.0.4`. */
  async describe(): Promise<string> {
    if (!this.backend) return this.ferretdbVersion ? `FerretDB ${this.ferretdbVersion}` : `MongoDB at MONGODB_URI`;
    const ferretdb = `FerretDB ${/FerretDB\/FerretDB (v[\d.]+)/.exec(readFileSync(FERRETDB_MODULE, 'utf8'))?.[1] ?? '1.x'}`;
    if (this.backend === 'sqlite') return `${ferretdb} over SQLite`;
    const postgres = execFileSync(join(postgresqlBin(), 'postgres'), ['--version'], { encoding: 'utf8' });
    return `${ferretdb} over PostgreSQL ${/\d+(\.\d+)?/.exec(postgres)?.[0] ?? ''}`.trim();
  }

  /** A fresh database per call unless one is named, so every test starts empty. */
  async openStore(database = this.freshDatabase()): Promise<Store> {
    return openStore(this.uri(database));
  }

  /** The server's URI naming this database. */
  uri(database: string): string {
    return withDatabase(this.baseUri, database);
  }

  freshDatabase(): string {
    const name = `${this.runId}_${this.databases.length + 1}`;
    this.databases.push(name);
    return name;
  }

  async stop(): Promise<void> {
    // FerretDB's files vanish with its directory; a shared server must be cleaned up.
    if (this.ferretdb) await this.ferretdb.stop();
    else if (this.baseUri) await dropDatabases(this.baseUri, this.databases);
  }
}

/** Where PostgreSQL's programs are (scripts/postgresql.sh bin); throws when it is not installed. */
export function postgresqlBin(): string {
  return execFileSync('bash', [POSTGRESQL_SCRIPT, 'bin'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

/** True when PostgreSQL is installed here, so that FerretDB can run over it. */
export function postgresqlInstalled(): boolean {
  try {
    postgresqlBin();
    return true;
  } catch {
    return false;
  }
}

class FerretDbProcess {
  private stderr = '';

  private constructor(
    readonly uri: string,
    private readonly child: ChildProcess,
    private readonly dataDir: string,
  ) {
    child.stderr?.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString()).slice(-4000);
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get dataDirectory(): string {
    return this.dataDir;
  }

  /** PostgreSQL's postmaster (the first line of its postmaster.pid), when FerretDB runs over it. */
  postmasterPid(): number | undefined {
    try {
      return Number(readFileSync(join(this.dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
    } catch {
      return undefined;
    }
  }

  /** FerretDB's own socket, behind the proxy. */
  get socket(): string {
    return join(this.dataDir, 'ferretdb.sock');
  }

  static async start(backend: FerretDbBackend): Promise<FerretDbProcess> {
    // Building first keeps a slow first-time Go build apart from the start-up deadline.
    await promisify(execFile)('bash', [FERRETDB_SCRIPT, 'build']);
    const port = await freePort();
    const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-ferretdb-'));
    // On SQLite the script execs the server, so this child is FerretDB (and its proxy) itself; on
    // PostgreSQL it is the script, which stops FerretDB and then PostgreSQL on SIGTERM.
    const command = backend === 'postgresql' ? 'start-postgresql' : 'start';
    const child = spawn('bash', [FERRETDB_SCRIPT, command, String(port), dataDir], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const server = new FerretDbProcess(`mongodb://127.0.0.1:${port}/`, child, dataDir);
    try {
      await server.waitUntilAnswering(STARTUP_DEADLINE_MS[backend]);
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  private async waitUntilAnswering(deadlineMs: number): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    while (Date.now() < deadline) {
      if (this.child.exitCode !== null) throw new Error(`FerretDB exited with ${this.child.exitCode}: ${this.stderr}`);
      if (await answersPing(this.uri)) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`FerretDB did not answer on ${this.uri} within ${deadlineMs} ms: ${this.stderr}`);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGTERM');
      const forceKill = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(forceKill);
    }
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

async function answersPing(uri: string): Promise<boolean> {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 500 });
  try {
    await client.connect();
    await client.db('admin').command({ ping: 1 });
    return true;
  } catch {
    return false;
  } finally {
    await client.close();
  }
}

async function ferretdbVersionOf(uri: string): Promise<string | undefined> {
  const client = await MongoClient.connect(uri);
  try {
    const info = await client.db('admin').command({ buildInfo: 1 });
    return typeof info.ferretdbVersion === 'string' ? info.ferretdbVersion : undefined;
  } finally {
    await client.close();
  }
}

/**
 * FerretDB 1.x runs findAndModify and update as a read followed by a separate
 * write by _id, so two concurrent conditional updates (or $inc on one counter)
 * can both succeed. Real MongoDB applies them atomically per document, and so
 * does the FerretDB this file starts (its proxy applies writes one at a time);
 * a FerretDB named by MONGODB_URI is taken to be a plain one.
 */
function concurrencyGapOf(ferretdbVersion: string | undefined): string | undefined {
  return ferretdbVersion && `FerretDB ${ferretdbVersion} does not apply findAndModify/update atomically`;
}

async function dropDatabases(uri: string, databases: string[]): Promise<void> {
  const client = await MongoClient.connect(uri);
  try {
    for (const name of databases) await client.db(name).dropDatabase();
  } finally {
    await client.close();
  }
}

/** The same server URI with another database in its path, query options kept. */
export function withDatabase(uri: string, database: string): string {
  const parts = /^(mongodb(?:\+srv)?:\/\/[^/?]+)(?:\/[^?]*)?(\?.*)?$/.exec(uri);
  if (!parts) throw new Error(`not a MongoDB URI: ${uri}`);
  return `${parts[1]}/${database}${parts[2] ?? ''}`;
}
