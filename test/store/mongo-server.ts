/**
 * The MongoDB server behind test/store/mongodb.test.ts: the one named by
 * MONGODB_URI when set, otherwise a FerretDB started for this run on a free
 * loopback port (scripts/ferretdb.sh) and stopped afterwards. That FerretDB
 * applies conditional writes atomically (see concurrencyGapOf).
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { MongoClient } from 'mongodb';
import { openArbiterStore as openStore } from '../../src/collections.js';
import type { Store } from '../../src/store/types.js';

const FERRETDB_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), '../../scripts/ferretdb.sh');
const STARTUP_DEADLINE_MS = 30_000;

export class MongoTestServer {
  /** Why this server's conditional writes are not atomic, when they are not (see ConformanceOptions). */
  concurrencyGap: string | undefined;
  /** The FerretDB version when the server is FerretDB rather than MongoDB. */
  ferretdbVersion: string | undefined;
  private baseUri = '';
  private ferretdb: FerretDbProcess | undefined;
  private readonly runId = `arbiter_test_${process.pid}_${Date.now().toString(36)}`;
  private readonly databases: string[] = [];

  async start(): Promise<void> {
    if (process.env.MONGODB_URI) {
      this.baseUri = process.env.MONGODB_URI;
    } else {
      this.ferretdb = await FerretDbProcess.start();
      this.baseUri = this.ferretdb.uri;
    }
    this.ferretdbVersion = await ferretdbVersionOf(this.baseUri);
    // Ours runs behind the proxy of test/support/ferretdb/main.go, which serialises writes.
    this.concurrencyGap = this.ferretdb ? undefined : concurrencyGapOf(this.ferretdbVersion);
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

  static async start(): Promise<FerretDbProcess> {
    // Building first keeps a slow first-time Go build apart from the start-up deadline.
    await promisify(execFile)('bash', [FERRETDB_SCRIPT, 'build']);
    const port = await freePort();
    const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-ferretdb-'));
    // The script execs the server, so this child is FerretDB (and its proxy) itself and kill() reaches it.
    const child = spawn('bash', [FERRETDB_SCRIPT, 'start', String(port), dataDir], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const server = new FerretDbProcess(`mongodb://127.0.0.1:${port}/`, child, dataDir);
    try {
      await server.waitUntilAnswering();
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  private async waitUntilAnswering(): Promise<void> {
    const deadline = Date.now() + STARTUP_DEADLINE_MS;
    while (Date.now() < deadline) {
      if (this.child.exitCode !== null) throw new Error(`FerretDB exited with ${this.child.exitCode}: ${this.stderr}`);
      if (await answersPing(this.uri)) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`FerretDB did not answer on ${this.uri} within ${STARTUP_DEADLINE_MS} ms: ${this.stderr}`);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGTERM');
      const forceKill = setTimeout(() => this.child.kill('SIGKILL'), 5000);
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

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/** The same server URI with another database in its path, query options kept. */
export function withDatabase(uri: string, database: string): string {
  const parts = /^(mongodb(?:\+srv)?:\/\/[^/?]+)(?:\/[^?]*)?(\?.*)?$/.exec(uri);
  if (!parts) throw new Error(`not a MongoDB URI: ${uri}`);
  return `${parts[1]}/${database}${parts[2] ?? ''}`;
}
