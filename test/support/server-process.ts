import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/index.js';
import { ADMIN_KEY, adminVia, freePort, requestAt, sharedFixture, testEnvironment, type TestServer } from './server.js';
import { entryPoint } from './entry-point.js';

/**
 * Starts `npm start`'s entry point as a process of its own (for measuring its memory, or
 * killing it) on a SQLite file in `dataDir` (or the store `env.STORE_URL` names), and resolves
 * once /healthz answers 200 with every worker up. One process (WORKERS=1) and no standby worker unless `env` says otherwise.
 */
export async function startServerProcess(options: {
  port: number;
  dataDir: string;
  env?: Record<string, string>;
  /** Told what the server writes on stdout (its log lines) and stderr. */
  onOutput?: (chunk: string) => void;
  /** When the server counts as started; default: /healthz 200 with every worker up. */
  started?: (url: string) => Promise<boolean>;
  /** The node binary to run (and the primary's workers to fork): default this one's. */
  execPath?: string;
}): Promise<ChildProcess> {
  const url = `http://127.0.0.1:${options.port}`;
  const child = spawn(options.execPath ?? process.execPath, entryPoint('main', options.env?.NODE_OPTIONS), {
    env: {
      PATH: process.env.PATH ?? '',
      PORT: String(options.port),
      STORE_URL: `sqlite:${options.dataDir}/arbiter.db`,
      SERVICE_ADMIN_API_KEY: ADMIN_KEY,
      LOG_LEVEL: 'silent',
      WORKERS: '1',
      // No standby worker unless a test asks for one (workers.test.ts): with WORKERS above 1 it loads one more
      // copy of the code beside the test, and what it is for (taking a dead worker's place) is that file's subject only.
      WORKER_STANDBY: 'false',
      ...options.env,
    },
    stdio: ['ignore', options.onOutput ? 'pipe' : 'ignore', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => options.onOutput?.(chunk.toString('utf8')));
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk;
    options.onOutput?.(chunk.toString('utf8'));
  });
  const deadline = Date.now() + 60_000;
  while (!(await (options.started ?? everyWorkerUp)(url))) {
    if (Date.now() > deadline || child.exitCode !== null) {
      if (child.exitCode === null) child.kill('SIGKILL');
      throw new Error(`the server did not become ready: ${stderr.slice(-2000)}`);
    }
    // A short step: the server answers a few hundred ms after it listens, and every process server waits here.
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return child;
}

/** /healthz answers 200 and, with several workers, lists them all as up. */
async function everyWorkerUp(url: string): Promise<boolean> {
  const response = await fetch(`${url}/healthz`).catch(() => undefined);
  if (response?.status !== 200) return false;
  const { workers } = (await response.json()) as { workers?: { configured: number; up: unknown[] } };
  return !workers || workers.up.length === workers.configured;
}

/** A server running as processes of its own (src/main.ts), used through HTTP as any test server. */
export interface ProcessServer extends TestServer {
  /** The process started: with WORKERS > 1, the primary. */
  process: ChildProcess;
  dataDir: string;
  /** What it wrote on stdout and stderr so far (JSON log lines, and any failure). */
  output(): string;
  /** Sends `signal` (SIGTERM by default) and resolves with how the process ended. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * src/main.ts as processes of their own with the test environment (test/support/server.ts) and
 * `env` (WORKERS=2 and no standby worker by default): the way to test what only several worker processes do. Its store
 * is in those processes: `store` and `server` are not available here.
 */
export async function startProcessServer(
  env: Record<string, string> = {},
  options: { execPath?: string } = {},
): Promise<ProcessServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-process-'));
  const port = await freePort();
  const fullEnv = { ...testEnvironment(port, dataDir), WORKERS: '2', ...env };
  let output = '';
  const child = await startServerProcess({
    port,
    dataDir,
    env: fullEnv,
    onOutput: (chunk) => (output += chunk),
    ...options,
  }).catch((error: unknown) => {
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  });
  const config = loadConfig(fullEnv);
  const url = `http://127.0.0.1:${port}`;
  const request = requestAt({ url, adminUrl: null });
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode !== null || child.signalCode !== null)
      return { code: child.exitCode, signal: child.signalCode as NodeJS.Signals | null };
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    child.kill(signal);
    const [code, endedBy] = await exited;
    return { code, signal: endedBy };
  };
  const unavailable = (what: string) => () => {
    throw new Error(`a process server's ${what} lives in its own processes`);
  };
  const server: Omit<ProcessServer, 'server' | 'store'> = {
    url,
    adminUrl: null,
    listening: { public: url, admin: null },
    config,
    process: child,
    dataDir,
    output: () => output,
    stop,
    request,
    admin: adminVia(request, 'public'),
    async waitUntilReady() {
      if (!(await everyWorkerUp(url))) throw new Error('the process server is not ready');
    },
    async close() {
      const ended = await stop();
      if (ended.code === null && ended.signal === null) child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return Object.defineProperties(server, {
    server: { get: unavailable('HTTP server') },
    store: { get: unavailable('store') },
  }) as ProcessServer;
}

/** One WORKERS=2 process server shared by the files that run their tests against it as well. */
export function withWorkersServer(): Promise<ProcessServer> {
  return sharedFixture('server process with WORKERS=2', () => startProcessServer());
}

/** One kept-alive connection, hence one worker process: every request through it is answered by that worker. */
export interface WorkerConnection {
  /** The worker's cluster id and pid, as its /healthz says (`workers.answeredBy`). */
  id: number;
  pid: number;
  request(
    path: string,
    init?: { method?: string; headers?: Record<string, string>; body?: string },
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: any }>;
  close(): void;
}

/**
 * A connection to each of `count` distinct workers of the server at `url`: connections are
 * opened until the workers that accepted them (the primary hands them out in turn) cover
 * `count` of them. A request whose connection was closed meanwhile (it would reach any worker
 * on a new one) fails instead of being answered by another worker.
 */
export async function connectionsToWorkers(url: string, count = 2): Promise<WorkerConnection[]> {
  return (await connectionsToEachWorker(url, count, 1)).flat();
}

/** `perWorker` connections to each of `count` distinct workers, grouped by worker. */
async function connectionsToEachWorker(url: string, count: number, perWorker: number): Promise<WorkerConnection[][]> {
  const byPid = new Map<number, WorkerConnection[]>();
  const complete = () => [...byPid.values()].filter((connections) => connections.length === perWorker).length >= count;
  for (let attempt = 0; attempt < 20 * count * perWorker && !complete(); attempt += 1) {
    const connection = await connectionTo(url);
    const connections = byPid.get(connection.pid) ?? [];
    if (connections.length === perWorker) connection.close();
    else byPid.set(connection.pid, [...connections, connection]);
  }
  const full = [...byPid.values()].filter((connections) => connections.length === perWorker);
  for (const connections of byPid.values()) if (!full.includes(connections)) connections.forEach((c) => c.close());
  if (full.length < count) throw new Error(`only ${full.length} distinct workers answered enough connections`);
  return full.slice(0, count);
}

/**
 * Requests spread over `perWorker` connections to each of `count` workers, handed out in turn
 * (worker A, worker B, worker A, …): simultaneous requests made with it race across processes.
 */
export async function spreadOverWorkers(
  url: string,
  { count = 2, perWorker = 3 } = {},
): Promise<{ request: WorkerConnection['request']; pids: number[]; close(): void }> {
  const groups = await connectionsToEachWorker(url, count, perWorker);
  const turns = Array.from({ length: perWorker }, (_, index) =>
    groups.map((connections) => connections[index]!),
  ).flat();
  let next = 0;
  return {
    request: (path, init) => turns[next++ % turns.length]!.request(path, init),
    pids: groups.map((connections) => connections[0]!.pid),
    close: () => turns.forEach((connection) => connection.close()),
  };
}

async function connectionTo(url: string): Promise<WorkerConnection> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let pinned: Socket | null = null;
  const send: WorkerConnection['request'] = (path, init = {}) =>
    new Promise((resolve, reject) => {
      const length = init.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(init.body)) };
      const outgoing = httpRequest(`${url}${path}`, {
        method: init.method ?? 'GET',
        headers: { ...length, ...init.headers },
        agent,
      });
      outgoing.on('socket', (socket) => {
        pinned ??= socket;
        if (socket !== pinned) outgoing.destroy(new Error('the connection to this worker was closed'));
      });
      outgoing.on('response', (incoming) => {
        const chunks: Buffer[] = [];
        incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
        incoming.on('error', reject);
        incoming.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown = text;
          try {
            body = text ? JSON.parse(text) : undefined;
          } catch {
            // not JSON: the text itself
          }
          resolve({ status: incoming.statusCode ?? 0, headers: incoming.headers, body });
        });
      });
      outgoing.on('error', reject);
      outgoing.end(init.body);
    });
  const health = await send('/healthz');
  const answeredBy = (health.body as { workers?: { answeredBy?: { id: number; pid: number } } }).workers?.answeredBy;
  if (!answeredBy) {
    agent.destroy();
    throw new Error(`/healthz names no worker: ${JSON.stringify(health.body)}`);
  }
  return { ...answeredBy, request: send, close: () => agent.destroy() };
}
