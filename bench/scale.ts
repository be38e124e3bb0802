/**
 * How throughput grows with nodes, per store engine: Arbiter as 1, 2, then 3 server processes,
 * each with WORKERS=1 and its own managed OPA, on one shared store, sharing one issuer as nodes
 * behind a load balancer do; and one node on its embedded SQLite file, in the same run, as the
 * reference. Engines (SCALE_STORES, `<engine>:<node counts>` separated by `;`):
 *   postgresql  a throwaway cluster of Debian's PostgreSQL (scripts/postgresql.sh), the nodes
 *               connected directly (default 1,2,3 nodes)
 *   sqlite      each node on a SQLite file of its own (default 1 node: one file is one machine's)
 *   ferretdb    FerretDB 1.24 over PostgreSQL behind the test proxy (test/store/mongo-server.ts):
 *               the MongoDB wire's figures, not a production setup (not run by default)
 * Scenarios (SCALE_SCENARIOS): client_credentials with client_secret_basic (BCrypt cost 10), and
 * introspection of one access token by a resource server holding a bearer token. BENCH_CONNECTIONS
 * in all (64), split evenly between the nodes by the bench's load generator (a child process; one
 * autocannon job per node, at once).
 *
 *   npm run bench:scale
 *   BENCH_SECONDS=20 SCALE_STORES='postgresql:1,2' SCALE_SCENARIOS=client_credentials npm run bench:scale
 *
 * Every step starts on an empty store with nodes of its own, so that the steps compare. Each step
 * reports the requests per second in all and per node with p50 and p99, where the machine's CPU
 * went meanwhile (bench/cpu.ts: the nodes, their OPAs, PostgreSQL, FerretDB, the load generator,
 * other processes), and the CPU time per request of each (the store server's: what one PostgreSQL
 * must give each token, so how many nodes it carries). On one machine they all share its cores: the
 * figures say what another node adds here, and what runs out first, not how nodes on machines of
 * their own would scale. A benchmark, not a test.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { MongoTestServer, type ProxyStats } from '../test/store/mongo-server.js';
import { PostgresTestServer } from '../test/store/postgres-server.js';
import { ADMIN_KEY, freePort } from '../test/support/server.js';
import { startServerProcess } from '../test/support/server-process.js';
import { basic, FORM } from '../test/support/oauth.js';
import { CpuMeter, type CpuUse, type ProcessInfo } from './cpu.js';
import { LoadGenerator, type LoadResult } from './load.js';
import { BCRYPT_COST } from './servers.js';
import { writeResults } from './stats.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const STORES = (process.env.SCALE_STORES ?? 'postgresql:1,2,3;sqlite:1').split(';').map((entry) => {
  const [engine = '', counts] = entry.split(':');
  if (!['postgresql', 'sqlite', 'ferretdb'].includes(engine)) throw new Error(`SCALE_STORES: unknown engine ${engine}`);
  return { engine: engine as EngineName, counts: (counts ?? '1').split(',').map(Number) };
});
const SCENARIOS = (process.env.SCALE_SCENARIOS ?? 'client_credentials,introspection').split(',') as Scenario[];
const CLIENT = { id: 'scale-machine', secret: 'scale-machine-secret-0123456789' };
const RESOURCE_SERVER = { id: 'scale-rs', secret: 'scale-rs-secret-0123456789abcdef' };
/** The machine counts as CPU-bound when its cores are this busy on average. */
const CPU_BOUND = 0.9;

type EngineName = 'postgresql' | 'sqlite' | 'ferretdb';
type Scenario = 'client_credentials' | 'introspection';

interface Node {
  url: string;
  process: ChildProcess;
  dataDir: string;
}

/** A store server the nodes of a step share (none for SQLite: each node has its file). */
interface Engine {
  name: EngineName;
  description: string;
  /** STORE_URL of an empty store; undefined: each node's own SQLite file. */
  freshUrl(): string | undefined;
  /** The store server's processes' roots, for CPU accounting. */
  processIds(): { postgresql?: number; ferretdb?: number };
  /** Runs a statement on the PostgreSQL under the store, when there is one of this run's. */
  sql?(statement: string): string[][];
  proxyStats?(): ProxyStats | undefined;
  stop(): Promise<void>;
}

interface Step {
  engine: EngineName;
  scenario: Scenario;
  nodes: number;
  rps: number;
  /** The slowest node's p99, ms. */
  p99: number;
  perNode: { rps: number; p50: number; p99: number; failed: number }[];
  cpu: CpuUse;
  /** CPU milliseconds per request, by component (Arbiter nodes together, OPA, PostgreSQL, …). */
  cpuMsPerRequest: Record<string, number>;
  /** Requests per second for each core the stack used (nodes, OPAs, store server, load generator). */
  rpsPerCore: number;
  /**
   * PostgreSQL's statements meanwhile (pg_stat_statements, warm-up included): execution time per
   * second, the costliest, and statements per response (every response of the run) with the most
   * frequent of them: the cost a node adds to each request, which the machine's load barely changes.
   */
  postgresql?: {
    executingMsPerSecond: number;
    top: { calls: number; ms: number; query: string }[];
    statementsPerRequest: number;
    frequent: { perRequest: number; query: string }[];
  };
  /** What the FerretDB proxy serialised meanwhile. */
  serialised?: { perSecond: number; exclusivePerSecond: number; averageWaitMs: number };
  bottleneck: string;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const nodes: Node[] = [];
  const load = new LoadGenerator();
  const steps: Step[] = [];
  const engines: Engine[] = [];
  try {
    for (const { engine: name, counts } of STORES) {
      const engine = await startEngine(name);
      engines.push(engine);
      console.log(`store: ${engine.description}`);
      for (const scenario of SCENARIOS) {
        for (const count of counts) {
          // Each step on an empty store, with nodes started for it, so that the steps compare.
          const storeUrl = engine.freshUrl();
          while (nodes.length < count) nodes.push(await startNode(storeUrl, nodes[0]?.url));
          const job = await prepare(nodes[0]!.url, scenario);
          steps.push(await measure(load, nodes, engine, scenario, job));
          while (nodes.length) await stopNode(nodes.pop()!);
        }
      }
    }
  } finally {
    load.close();
    for (const node of nodes) await stopNode(node);
    for (const engine of engines) await engine.stop();
  }
  report(startedAt, steps);
}

async function startEngine(name: EngineName): Promise<Engine> {
  if (name === 'sqlite')
    return {
      name,
      description: 'SQLite (a file per node)',
      freshUrl: () => undefined,
      processIds: () => ({}),
      stop: async () => {},
    };
  if (name === 'postgresql') {
    const postgres = await PostgresTestServer.start({ own: true });
    return {
      name,
      description: `PostgreSQL ${postgres.sql('SHOW server_version')[0]![0]} (direct, pool_size 10 per node)`,
      freshUrl: () => postgres.url(),
      processIds: () => ({ postgresql: postgres.postmasterPid() ?? undefined }),
      sql: (statement) => postgres.sql(statement),
      stop: () => postgres.stop(),
    };
  }
  const mongo = new MongoTestServer({ backend: 'postgresql' });
  await mongo.start();
  return {
    name,
    description: `${await mongo.describe()} (behind the test proxy)`,
    freshUrl: () => mongo.uri(mongo.freshDatabase()),
    processIds: () => mongo.processIds(),
    sql: (statement) => mongo.postgresqlQuery(statement),
    proxyStats: () => mongo.proxyStats(),
    stop: () => mongo.stop(),
  };
}

async function startNode(storeUrl: string | undefined, issuer?: string): Promise<Node> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(os.tmpdir(), 'arbiter-scale-'));
  const url = `http://127.0.0.1:${port}`;
  const child = await startServerProcess({
    port,
    dataDir,
    env: {
      ...(storeUrl && { STORE_URL: storeUrl }),
      ISSUER: issuer ?? url,
      AUTH_FAILURE_LIMIT: '1000000',
      WORKERS: '1',
    },
  });
  return { url, process: child, dataDir };
}

async function stopNode(node: Node): Promise<void> {
  const exited = new Promise((resolve) => node.process.once('exit', resolve));
  node.process.kill('SIGTERM');
  await exited;
  rmSync(node.dataDir, { recursive: true, force: true });
}

async function createClient(url: string, client: { id: string; secret: string }, scopes: string[]): Promise<void> {
  const record = {
    clientId: client.id,
    clientType: 'confidential',
    clientSecret: bcrypt.hashSync(client.secret, BCRYPT_COST),
    scopes,
  };
  const response = await fetchAnew(`${url}/admin/api/clients`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-admin-api-key': ADMIN_KEY },
    body: JSON.stringify(record),
  });
  if (response.status !== 201) throw new Error(`client not created: ${response.status} ${await response.text()}`);
}

/**
 * fetch, once more when the connection was closed under it: a node of this step may listen on the
 * port of a stopped node of the last one, to which fetch still holds a kept-alive socket.
 */
async function fetchAnew(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch {
    return fetch(url, init);
  }
}

const tokenRequest = (client: { id: string; secret: string }, scope: string) => ({
  headers: { ...FORM, authorization: basic(client.id, client.secret) },
  body: new URLSearchParams({ grant_type: 'client_credentials', scope }).toString(),
});

/** A request of the scenario: path, headers and body, the same for every request of the run. */
interface Job {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** The scenario's clients on the store, and its request: a token request, or an introspection of one token. */
async function prepare(url: string, scenario: Scenario): Promise<Job> {
  await createClient(url, CLIENT, ['read']);
  if (scenario === 'client_credentials') return { path: '/token', ...tokenRequest(CLIENT, 'read') };
  await createClient(url, RESOURCE_SERVER, ['introspection']);
  const token = async (client: typeof CLIENT, scope: string) => {
    const response = await fetchAnew(`${url}/token`, { method: 'POST', ...tokenRequest(client, scope) });
    const body = (await response.json()) as { access_token?: unknown };
    if (typeof body.access_token !== 'string') throw new Error(`${url}: ${response.status} ${JSON.stringify(body)}`);
    return body.access_token;
  };
  const [introspected, bearer] = [await token(CLIENT, 'read'), await token(RESOURCE_SERVER, 'introspection')];
  return {
    path: '/introspect',
    headers: { ...FORM, authorization: `Bearer ${bearer}` },
    body: new URLSearchParams({ token: introspected }).toString(),
  };
}

/** Every node answers the request correctly, then all of them are loaded at once while the CPU is metered. */
async function measure(
  load: LoadGenerator,
  nodes: Node[],
  engine: Engine,
  scenario: Scenario,
  job: Job,
): Promise<Step> {
  for (const node of nodes) {
    const response = await fetchAnew(`${node.url}${job.path}`, {
      method: 'POST',
      headers: job.headers,
      body: job.body,
    });
    const body = (await response.json()) as { access_token?: unknown; active?: unknown };
    if (response.status !== 200 || (typeof body.access_token !== 'string' && body.active !== true))
      throw new Error(`${node.url}: ${response.status} ${JSON.stringify(body)}`);
  }
  const connections = Math.max(1, Math.floor(CONNECTIONS / nodes.length));
  const meter = new CpuMeter(componentOf(nodes, engine, load));
  const statsBefore = engine.proxyStats?.();
  engine.sql?.('SELECT pg_stat_statements_reset()');
  meter.start();
  const runs = await Promise.all(
    nodes.map((node) =>
      load.run({
        url: `${node.url}${job.path}`,
        method: 'POST',
        headers: job.headers,
        body: job.body,
        connections,
        warmupSeconds: 3,
        seconds: SECONDS,
      }),
    ),
  );
  const cpu = meter.stop();
  const serialised = serialisedDuring(statsBefore, engine.proxyStats?.(), cpu.seconds);
  const responses = runs.reduce((sum, run) => sum + run.responses, 0);
  const postgresql = engine.sql ? statementsDuring(engine.sql, cpu.seconds, responses) : undefined;
  const perNode = runs.map(({ measured }: { measured: LoadResult }) => ({
    rps: Math.round(measured.rps),
    p50: measured.p50,
    p99: measured.p99,
    failed: measured.errors + measured.non2xx,
  }));
  const rps = perNode.reduce((sum, node) => sum + node.rps, 0);
  const ours = Object.entries(cpu.cores)
    .filter(([name]) => name !== 'other processes')
    .reduce((sum, [, cores]) => sum + cores, 0);
  const cpuMsPerRequest: Record<string, number> = {};
  for (const [name, cores] of Object.entries(cpu.cores)) {
    const component = name.startsWith('Arbiter node') ? 'Arbiter nodes' : name;
    cpuMsPerRequest[component] = (cpuMsPerRequest[component] ?? 0) + (cores * 1000) / Math.max(rps, 1);
  }
  for (const component of Object.keys(cpuMsPerRequest))
    cpuMsPerRequest[component] = Math.round(cpuMsPerRequest[component]! * 1000) / 1000;
  const step: Step = {
    engine: engine.name,
    scenario,
    nodes: nodes.length,
    rps,
    p99: Math.max(...perNode.map((node) => node.p99)),
    perNode,
    cpu,
    cpuMsPerRequest,
    rpsPerCore: Math.round(rps / Math.max(ours, 0.01)),
    ...(serialised ? { serialised } : {}),
    ...(postgresql ? { postgresql } : {}),
    bottleneck: bottleneckOf(cpu, serialised),
  };
  console.log(
    `${engine.name} ${scenario} ${step.nodes} node(s): ${step.rps} req/s in all, p99 ${step.p99} ms; ${perNode.map((node, i) => `node ${i + 1} ${node.rps} req/s p50 ${node.p50} ms p99 ${node.p99} ms${node.failed ? ` ${node.failed} failed` : ''}`).join('; ')}`,
  );
  console.log(`  CPU (cores of ${cpu.machine.cpus}): ${describeCpu(cpu)}; ${step.rpsPerCore} req/s per core of ours`);
  console.log(
    `  CPU ms per request: ${Object.entries(cpuMsPerRequest)
      .map(([name, ms]) => `${name} ${ms}`)
      .join(', ')}`,
  );
  if (serialised)
    console.log(
      `  proxy: ${serialised.perSecond} serialised writes/s (${serialised.exclusivePerSecond}/s exclusive), ${serialised.averageWaitMs} ms average wait for the lock`,
    );
  if (postgresql) {
    console.log(`  PostgreSQL executed statements ${postgresql.executingMsPerSecond} ms per second; costliest:`);
    for (const { calls, ms, query } of postgresql.top) console.log(`    ${ms} ms in ${calls} calls: ${query}`);
    console.log(`  PostgreSQL statements per request: ${postgresql.statementsPerRequest}; most frequent:`);
    for (const { perRequest, query } of postgresql.frequent) console.log(`    ${perRequest} per request: ${query}`);
  }
  console.log(`  bottleneck: ${step.bottleneck}`);
  return step;
}

/**
 * Each process under the component it belongs to: a node's OPA (a child named `opa`) or the node
 * itself; FerretDB and its proxy; PostgreSQL (the postmaster and its backends); the load generator.
 */
function componentOf(nodes: Node[], engine: Engine, load: LoadGenerator) {
  const nodePids = nodes.map((node) => node.process.pid);
  const { ferretdb, postgresql } = engine.processIds();
  return (info: ProcessInfo, ancestors: ProcessInfo[]): string | null => {
    const lineage = [info, ...ancestors].map((each) => each.pid);
    const node = nodePids.findIndex((pid) => pid !== undefined && lineage.includes(pid));
    if (node >= 0) return info.comm === 'opa' ? 'OPA' : `Arbiter node ${node + 1}`;
    if (postgresql !== undefined && lineage.includes(postgresql)) return 'PostgreSQL';
    if (ferretdb !== undefined && lineage.includes(ferretdb)) return 'FerretDB';
    if (load.pid !== undefined && lineage.includes(load.pid)) return 'load generator';
    if (info.pid === process.pid) return 'bench';
    return null;
  };
}

function describeCpu(cpu: CpuUse): string {
  return `${Object.entries(cpu.cores)
    .sort((a, b) => b[1] - a[1])
    .map(([name, cores]) => `${name} ${cores.toFixed(2)}`)
    .join(', ')}; machine ${cpu.machine.busy.toFixed(2)} busy`;
}

/**
 * What pg_stat_statements counted since its reset: execution time per second, the costliest
 * statements, and statements per response (of `responses`, every response since the reset).
 */
function statementsDuring(sql: (statement: string) => string[][], seconds: number, responses: number) {
  const query = "left(regexp_replace(query, '\\s+', ' ', 'g'), 140)";
  // Aggregates: one row.
  const [time, calls] = sql(
    'SELECT coalesce(sum(total_exec_time), 0), coalesce(sum(calls), 0) FROM pg_stat_statements',
  )[0]!;
  const top = sql(
    `SELECT calls, round(total_exec_time), ${query} FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 4`,
  ).map(([count, ms, text = '']) => ({ calls: Number(count), ms: Number(ms), query: text }));
  const perRequest = (count: number) => Math.round((count / Math.max(responses, 1)) * 1000) / 1000;
  const frequent = sql(`SELECT calls, ${query} FROM pg_stat_statements ORDER BY calls DESC LIMIT 10`).map(
    ([count, text = '']) => ({ perRequest: perRequest(Number(count)), query: text }),
  );
  return {
    executingMsPerSecond: Math.round(Number(time) / seconds),
    top,
    statementsPerRequest: perRequest(Number(calls)),
    frequent,
  };
}

/** The proxy's serialised writes between two readings of its totals, over `seconds`. */
function serialisedDuring(before: ProxyStats | undefined, after: ProxyStats | undefined, seconds: number) {
  if (!after) return undefined;
  const total = (stats: ProxyStats | undefined) =>
    Object.values(stats?.serialised ?? {}).reduce((sum, count) => sum + count, 0);
  const count = total(after) - total(before);
  const waited = after.waitedSeconds - (before?.waitedSeconds ?? 0);
  return {
    perSecond: Math.round(count / seconds),
    exclusivePerSecond: Math.round((after.exclusive - (before?.exclusive ?? 0)) / seconds),
    averageWaitMs: count > 0 ? Math.round((waited / count) * 100_000) / 100 : 0,
  };
}

/** What ran out: the machine's cores (and who used them most), or something that waits rather than computes. */
function bottleneckOf(cpu: CpuUse, serialised: Step['serialised']): string {
  const shares = Object.entries(cpu.cores).sort((a, b) => b[1] - a[1]);
  const arbiter = shares.filter(([name]) => name.startsWith('Arbiter node')).reduce((sum, [, cores]) => sum + cores, 0);
  const biggest = [
    ['Arbiter nodes together', arbiter] as const,
    ...shares.filter(([name]) => !name.startsWith('Arbiter node')),
  ]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([name, cores]) => `${name} ${cores.toFixed(2)}`)
    .join(', ');
  const waits = serialised
    ? `; the proxy's serialised writes waited ${serialised.averageWaitMs} ms each on average`
    : '';
  if (cpu.machine.busy >= CPU_BOUND * cpu.machine.cpus)
    return `CPU: the machine's ${cpu.machine.cpus} cores are busy (${cpu.machine.busy.toFixed(2)}); most of it: ${biggest}${waits}`;
  return `not CPU (${cpu.machine.busy.toFixed(2)} of ${cpu.machine.cpus} cores busy): requests wait (the store's round trips, PostgreSQL's commits, the proxy's locks); most CPU: ${biggest}${waits}`;
}

function report(startedAt: Date, steps: Step[]): void {
  console.log(
    '\nsummary (req/s in all, p99 ms; CPU ms per request of the nodes, and of PostgreSQL and its statements per request where it runs):',
  );
  for (const scenario of SCENARIOS) {
    const sqlite = steps.find((step) => step.scenario === scenario && step.engine === 'sqlite' && step.nodes === 1);
    for (const step of steps.filter((each) => each.scenario === scenario)) {
      const versusSqlite =
        sqlite && step !== sqlite ? `, ${(step.rps / sqlite.rps).toFixed(2)}x one node on SQLite` : '';
      console.log(
        `  ${scenario} ${step.engine} ${step.nodes} node(s): ${step.rps} req/s p99 ${step.p99} ms; nodes ${step.cpuMsPerRequest['Arbiter nodes'] ?? 0} ms` +
          `${step.cpuMsPerRequest.PostgreSQL !== undefined ? `, PostgreSQL ${step.cpuMsPerRequest.PostgreSQL} ms` : ''}` +
          `${step.postgresql ? `, ${step.postgresql.statementsPerRequest} statements` : ''}${versusSqlite}`,
      );
    }
  }
  console.log(
    `  (${os.cpus().length} CPUs, ${CONNECTIONS} connections, ${SECONDS} s windows, WORKERS=1, load average ${os
      .loadavg()
      .map((value) => value.toFixed(2))
      .join(' ')})`,
  );
  const file = writeResults('scale', startedAt, {
    connections: CONNECTIONS,
    seconds: SECONDS,
    workers: 1,
    steps,
  });
  console.log(`written to ${file}`);
  if (steps.some((step) => step.perNode.some((node) => node.failed > 0))) process.exitCode = 1;
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
