/**
 * The load generator: autocannon in a child process of its own (load-worker.ts), so that the
 * client's work (HTTP parsing, signing client assertions, histograms, garbage) does not run on
 * the event loop of the servers it measures, which live in the bench's process.
 *
 * A job is one autocannon run on one set of connections: at least `warmupSeconds` of warm-up,
 * then the measured window of `seconds`, of which only the responses received within the window
 * count. The window also waits until every connection has had its first response: a saturated
 * Node.js server accepts new connections slowly (on this 2-CPU machine, with a few milliseconds of
 * work per request, about one every 100 ms: seconds for 64), and the first request of a late
 * connection would otherwise be the p99 of a slow server's window. Nor does the window see the
 * drain at the end.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { AssertionSpec } from './assertion.js';

export interface LoadJob {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  /** The same body for every request; */
  body?: string;
  /**
   * or one body per request, in order (codes), for at most `bodies.length - connections` requests
   * (autocannon builds one request ahead per connection); with `cycle`, in turn, over and over;
   */
  bodies?: string[];
  cycle?: boolean;
  /** With `bodies`: the path of each request, in turn with them (several tenants' /t/<tenant>/token); default: `url`'s. */
  paths?: string[];
  /** or a body with a freshly signed client assertion for every request. */
  assertion?: AssertionSpec;
  connections: number;
  /** At least this much warm-up (longer until every connection has had a response). */
  warmupSeconds: number;
  /** The measured window. */
  seconds: number;
}

export interface LoadResult {
  /** Responses received in the window (every status). */
  requests: number;
  /** The window's length: `seconds`, or less when `bodies` ran out. */
  seconds: number;
  rps: number;
  /** Latency of the window's 2xx responses, ms. */
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
  /** Connection errors and timeouts in the window. */
  errors: number;
  non2xx: number;
  statuses: Record<string, number>;
  /** True when `bodies` ran out before the window's end. */
  exhausted: boolean;
}

export interface LoadRun {
  warmup: LoadResult;
  measured: LoadResult;
  /** When every connection had had a response, from the start of the run (null: not all did). */
  connectedSeconds: number | null;
  /** Every response over the whole run, per second (warm-up and connection setup included). */
  overallRps: number;
  /** Every response over the whole run (warm-up, window and drain). */
  responses: number;
}

type Reply = { id: number; run?: LoadRun; error?: string };

export class LoadGenerator {
  private readonly child: ChildProcess;
  private next = 0;
  private readonly waiting = new Map<number, { resolve(run: LoadRun): void; reject(error: Error): void }>();

  constructor() {
    // process.execArgv carries tsx's loader (so the worker runs as TypeScript too), less any profiling flags meant for the servers.
    const execArgv = process.execArgv.filter(
      (flag) => !flag.startsWith('--cpu-prof') && !flag.startsWith('--heap-prof'),
    );
    this.child = fork(fileURLToPath(new URL('./load-worker.ts', import.meta.url)), {
      execArgv,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (reply: Reply) => {
      const pending = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      if (reply.error !== undefined) pending?.reject(new Error(reply.error));
      else pending?.resolve(reply.run!);
    });
    this.child.on('exit', (code) => {
      for (const pending of this.waiting.values()) pending.reject(new Error(`the load generator exited (${code})`));
      this.waiting.clear();
    });
  }

  run(job: LoadJob): Promise<LoadRun> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.child.send({ id, job });
    });
  }

  /** The generator's process id (for CPU accounting). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  close(): void {
    this.child.disconnect();
  }
}
