/**
 * How throughput grows with nodes: Arbiter as 1, 2, then 3 server processes (SCALE_NODES), each
 * with WORKERS=1 and its own managed OPA, on one MongoDB-wire store, sharing one issuer as nodes
 * behind a load balancer do. The store is FerretDB 1.24 over PostgreSQL where PostgreSQL is
 * installed (scripts/postgresql.sh; over SQLite otherwise, or as FERRETDB_BACKEND says), or the
 * MongoDB named by MONGODB_URI. The load is client_credentials with client_secret_basic (BCrypt
 * cost 10), BENCH_CONNECTIONS in all (64), split evenly between the nodes by the bench's load
 * generator (a child process; one autocannon job per node, at once).
 *
 *   npm run bench:scale
 *   BENCH_SECONDS=20 SCALE_NODES=1,2 npm run bench:scale
 *   SCALE_FRESH=0 npm run bench:scale      one store for every step (it grows), nodes added to the running ones
 *
 * By default every step starts on an empty database with nodes of its own, so that the steps
 * compare (the token collection grows by thousands of documents a step, and FerretDB reads whole
 * collections for some filters).
 *
 * Each step reports the requests per second in all and per node with p50 and p99, and where the
 * machine's CPU went meanwhile (bench/cpu.ts): the nodes, their OPAs, FerretDB, PostgreSQL, the
 * load generator and other processes. On one machine they all share its cores: the figures say
 * what another node adds here, and what runs out first, not how nodes on machines of their own
 * would scale. A benchmark, not a test.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import {
  MongoTestServer,
  preferredBackend,
  type FerretDbBackend,
  type ProxyStats,
} from '../test/store/mongo-server.js';
import { ADMIN_KEY, freePort } from '../test/support/server.js';
import { startServerProcess } from '../test/support/server-process.js';
import { basic, FORM } from '../test/support/oauth.js';
import { CpuMeter, type CpuUse, type ProcessInfo } from './cpu.js';
import { LoadGenerator, type LoadResult } from './load.js';
import { BCRYPT_COST } from './servers.js';
import { writeResults } from './stats.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const NODE_COUNTS = (process.env.SCALE_NODES ?? '1,2,3').split(',').map(Number);
const FRESH = process.env.SCALE_FRESH !== '0';
const CLIENT = { id: 'scale-machine', secret: 'scale-machine-secret-0123456789' };
/** The machine counts as CPU-bound when its cores are this busy on average. */
const CPU_BOUND = 0.9;

interface Node {
  url: string;
  process: ChildProcess;
  dataDir: string;
}

interface Step {
  nodes: number;
  rps: number;
  /** The slowest node's p99, ms. */
  p99: number;
  perNode: { rps: number; p50: number; p99: number; failed: number }[];
  cpu: CpuUse;
  /** Requests per second for each core the stack used (nodes, OPAs, FerretDB, PostgreSQL, load generator). */
  rpsPerCore: number;
  /** PostgreSQL's statements meanwhile (pg_stat_statements): execution time per second, and the costliest. */
  postgresql?: { executingMsPerSecond: number; top: { calls: number; ms: number; query: string }[] };
  /** What the FerretDB proxy serialised meanwhile (absent with MONGODB_URI). */
  serialised?: { perSecond: number; exclusivePerSecond: number; averageWaitMs: number };
  bottleneck: string;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const backend = (process.env.FERRETDB_BACKEND as FerretDbBackend | undefined) ?? preferredBackend();
  const mongo = new MongoTestServer({ backend });
  await mongo.start();
  const store = await mongo.describe();
  console.log(`store: ${store}`);
  const nodes: Node[] = [];
  const load = new LoadGenerator();
  const steps: Step[] = [];
  try {
    let storeUrl = '';
    for (const count of NODE_COUNTS) {
      // Each step on an empty database, with nodes started for it, so that the steps compare;
      // SCALE_FRESH=0 keeps one store and adds nodes to the running ones (the store's growth then shows).
      if (FRESH || !storeUrl) {
        while (nodes.length) await stopNode(nodes.pop()!);
        storeUrl = mongo.uri(mongo.freshDatabase());
      }
      while (nodes.length < count) nodes.push(await startNode(storeUrl, nodes[0]?.url));
      if (FRESH || steps.length === 0) await createClient(nodes[0].url);
      steps.push(await measure(load, nodes, mongo));
    }
  } finally {
    load.close();
    for (const node of nodes) await stopNode(node);
    await mongo.stop();
  }
  report(startedAt, steps, store);
}

async function startNode(storeUrl: string, issuer?: string): Promise<Node> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(os.tmpdir(), 'arbiter-scale-'));
  const url = `http://127.0.0.1:${port}`;
  const child = await startServerProcess({
    port,
    dataDir,
    env: { STORE_URL: storeUrl, ISSUER: issuer ?? url, AUTH_FAILURE_LIMIT: '1000000', WORKERS: '1' },
  });
  return { url, process: child, dataDir };
}

async function stopNode(node: Node): Promise<void> {
  const exited = new Promise((resolve) => node.process.once('exit', resolve));
  node.process.kill('SIGTERM');
  await exited;
  rmSync(node.dataDir, { recursive: true, force: true });
}

async function createClient(url: string): Promise<void> {
  const record = {
    clientId: CLIENT.id,
    clientType: 'confidential',
    clientSecret: bcrypt.hashSync(CLIENT.secret, BCRYPT_COST),
    scopes: ['read'],
  };
  const response = await fetch(`${url}/admin/api/clients`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-admin-api-key': ADMIN_KEY },
    body: JSON.stringify(record),
  });
  if (response.status !== 201) throw new Error(`client not created: ${response.status} ${await response.text()}`);
}

const TOKEN_REQUEST = {
  headers: { ...FORM, authorization: basic(CLIENT.id, CLIENT.secret) },
  body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'read' }).toString(),
};

/** Every node answers a token request correctly, then all of them are loaded at once while the CPU is metered. */
async function measure(load: LoadGenerator, nodes: Node[], mongo: MongoTestServer): Promise<Step> {
  for (const node of nodes) {
    const response = await fetch(`${node.url}/token`, { method: 'POST', ...TOKEN_REQUEST });
    const body = (await response.json()) as { access_token?: unknown };
    if (response.status !== 200 || typeof body.access_token !== 'string')
      throw new Error(`${node.url}: ${response.status} ${JSON.stringify(body)}`);
  }
  const connections = Math.max(1, Math.floor(CONNECTIONS / nodes.length));
  const meter = new CpuMeter(componentOf(nodes, mongo, load));
  const statsBefore = mongo.proxyStats();
  if (mongo.backend === 'postgresql') mongo.postgresqlQuery('SELECT pg_stat_statements_reset()');
  meter.start();
  const runs = await Promise.all(
    nodes.map((node) =>
      load.run({
        url: `${node.url}/token`,
        method: 'POST',
        ...TOKEN_REQUEST,
        connections,
        warmupSeconds: 3,
        seconds: SECONDS,
      }),
    ),
  );
  const cpu = meter.stop();
  const serialised = serialisedDuring(statsBefore, mongo.proxyStats(), cpu.seconds);
  const postgresql = mongo.backend === 'postgresql' ? statementsDuring(mongo, cpu.seconds) : undefined;
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
  const step: Step = {
    nodes: nodes.length,
    rps,
    p99: Math.max(...perNode.map((node) => node.p99)),
    perNode,
    cpu,
    rpsPerCore: Math.round(rps / Math.max(ours, 0.01)),
    ...(serialised ? { serialised } : {}),
    ...(postgresql ? { postgresql } : {}),
    bottleneck: bottleneckOf(cpu, serialised),
  };
  console.log(
    `${step.nodes} node(s): ${step.rps} req/s in all, p99 ${step.p99} ms; ${perNode.map((node, i) => `node ${i + 1} ${node.rps} req/s p50 ${node.p50} ms p99 ${node.p99} ms${node.failed ? ` ${node.failed} failed` : ''}`).join('; ')}`,
  );
  console.log(`  CPU (cores of ${cpu.machine.cpus}): ${describeCpu(cpu)}; ${step.rpsPerCore} req/s per core of ours`);
  if (serialised)
    console.log(
      `  proxy: ${serialised.perSecond} serialised writes/s (${serialised.exclusivePerSecond}/s exclusive), ${serialised.averageWaitMs} ms average wait for the lock`,
    );
  if (postgresql) {
    console.log(`  PostgreSQL executed statements ${postgresql.executingMsPerSecond} ms per second; costliest:`);
    for (const { calls, ms, query } of postgresql.top) console.log(`    ${ms} ms in ${calls} calls: ${query}`);
  }
  console.log(`  bottleneck: ${step.bottleneck}`);
  return step;
}

/**
 * Each process under the component it belongs to: a node's OPA (a child named `opa`) or the node
 * itself; FerretDB and its proxy; PostgreSQL (the postmaster and its backends); the load generator.
 */
function componentOf(nodes: Node[], mongo: MongoTestServer, load: LoadGenerator) {
  const nodePids = nodes.map((node) => node.process.pid);
  const { ferretdb, postgresql } = mongo.processIds();
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

/** What pg_stat_statements counted since its reset: execution time per second and the costliest statements. */
function statementsDuring(mongo: MongoTestServer, seconds: number) {
  const [[total]] = mongo.postgresqlQuery('SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements');
  const top = mongo
    .postgresqlQuery(
      "SELECT calls, round(total_exec_time), left(regexp_replace(query, '\\s+', ' ', 'g'), 140) FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 4",
    )
    .map(([calls, ms, query]) => ({ calls: Number(calls), ms: Number(ms), query }));
  return { executingMsPerSecond: Math.round(Number(total) / seconds), top };
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

function report(startedAt: Date, steps: Step[], store: string): void {
  const [one] = steps;
  const growth = steps.map((step) => Math.round((step.rps / one.rps) * 100) / 100);
  console.log(
    `\n${steps.map((step) => `${step.nodes} node(s) ${step.rps} req/s p99 ${step.p99} ms`).join('; ')}; ` +
      `growth ${growth.map((factor) => `${factor}x`).join(' / ')} (${os.cpus().length} CPUs, store ${store}, ${CONNECTIONS} connections, ${SECONDS} s windows, WORKERS=1)`,
  );
  const file = writeResults('scale', startedAt, {
    store,
    connections: CONNECTIONS,
    seconds: SECONDS,
    workers: 1,
    freshStorePerStep: FRESH,
    growth,
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
