/**
 * The PostgreSQL server behind the PostgreSQL store's tests, the multi-node tests and bench:scale:
 * the one named by POSTGRES_URL when set, otherwise a throwaway cluster of Debian's PostgreSQL
 * started for this run (scripts/postgresql.sh: a directory of its own, a Unix socket, no TCP port)
 * and stopped afterwards. Stores keep apart through schemas of their own (freshSchema), which is
 * much quicker than a database per test.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { openArbiterStore } from '../../src/collections.js';
import type { Store } from '../../src/store/types.js';
import { sharedFixture } from '../support/server.js';

const POSTGRESQL_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), '../../scripts/postgresql.sh');

/** One started cluster for every test file of the run that asks for it (closed by the root hook, test/support/root.ts). */
export function sharedPostgresTestServer(): Promise<PostgresTestServer> {
  return sharedFixture('postgres-test-server', async () => {
    const server = await PostgresTestServer.start();
    return Object.assign(server, { close: () => server.stop() });
  });
}

export class PostgresTestServer {
  private readonly runId = `arbiter_test_${process.pid}_${Date.now().toString(36)}`;
  private schemas = 0;

  private constructor(
    private readonly baseUrl: string,
    /** The cluster's directory when this run started it; null with POSTGRES_URL. */
    readonly directory: string | null,
  ) {}

  /** A cluster of its own (a test that stops or freezes it), or the shared one's settings from POSTGRES_URL. */
  static async start({ own = false } = {}): Promise<PostgresTestServer> {
    if (process.env.POSTGRES_URL && !own) return new PostgresTestServer(process.env.POSTGRES_URL, null);
    const directory = join(mkdtempSync(join(tmpdir(), 'arbiter-postgres-')), 'pg');
    try {
      const { stdout } = await promisify(execFile)('bash', [POSTGRESQL_SCRIPT, 'start', directory], {
        env: { ...process.env, POSTGRES_ID_INDEX: '0' },
      });
      return new PostgresTestServer(stdout.trim(), directory);
    } catch (error) {
      rmSync(dirname(directory), { recursive: true, force: true });
      throw error;
    }
  }

  /** STORE_URL for a schema of its own (a fresh one per call unless named), with extra settings. */
  url(schema = this.freshSchema(), settings: Record<string, string> = {}): string {
    const query = new URLSearchParams({ schema, ...settings }).toString();
    return `${this.baseUrl}${this.baseUrl.includes('?') ? '&' : '?'}${query}`;
  }

  freshSchema(): string {
    this.schemas += 1;
    return `${this.runId}_${this.schemas}`;
  }

  /** A fresh, empty store (with Arbiter's collections, as the server opens it). */
  openStore(schema?: string, settings?: Record<string, string>): Promise<Store> {
    return openArbiterStore(this.url(schema, settings));
  }

  /** The postmaster's process id (the first line of postmaster.pid), to freeze or stop the server; null with POSTGRES_URL. */
  postmasterPid(): number | null {
    if (!this.directory) return null;
    return Number(readFileSync(join(this.directory, 'postmaster.pid'), 'utf8').split('\n')[0]);
  }

  /** The postmaster and every process it started (/proc), to freeze the whole cluster; empty with POSTGRES_URL. */
  processes(): number[] {
    const postmaster = this.postmasterPid();
    if (postmaster === null) return [];
    const children = readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((entry) => {
        try {
          const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
        } catch {
          return false;
        }
      })
      .map(Number);
    return [postmaster, ...children];
  }

  /** Runs one statement (psql); its rows, tab-separated. Only on a cluster started here. */
  sql(statement: string): string[][] {
    if (!this.directory) throw new Error('no cluster of this run (POSTGRES_URL names the server)');
    return execFileSync('bash', [POSTGRESQL_SCRIPT, 'sql', this.directory, statement], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('\t'));
  }

  async stop(): Promise<void> {
    if (!this.directory) return;
    await promisify(execFile)('bash', [POSTGRESQL_SCRIPT, 'stop', this.directory]).catch(() => undefined);
    rmSync(dirname(this.directory), { recursive: true, force: true });
  }
}
