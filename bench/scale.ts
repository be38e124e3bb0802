/**
 * How throughput grows with nodes: Arbiter as 1, then 2 server processes (each with its own
 * managed OPA) on one MongoDB-wire store (FerretDB, or the MongoDB named by MONGODB_URI), sharing
 * one issuer as nodes behind a load balancer do. The load is client_credentials with
 * client_secret_basic (BCrypt cost 10), BENCH_CONNECTIONS in all (64), split evenly between the
 * nodes by the bench's load generator (a child process; one autocannon job per node, at once).
 *
 *   npm run bench:scale
 *   BENCH_SECONDS=20 npm run bench:scale
 *
 * On one machine the nodes, their OPAs, the store and the load generator share its cores: the
 * figure says what a second node adds here, not on a second machine. A benchmark, not a test.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import bcrypt from 'bcryptjs';
import { MongoTestServer } from '../test/store/mongo-server.js';
import { ADMIN_KEY, freePort } from '../test/support/server.js';
import { startServerProcess } from '../test/support/server-process.js';
import { basic, FORM } from '../test/support/oauth.js';
import { LoadGenerator, type LoadResult } from './load.js';
import { BCRYPT_COST } from './servers.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const CLIENT = { id: 'scale-machine', secret: 'scale-machine-secret-0123456789' };

interface Node {
  url: string;
  process: ChildProcess;
  dataDir: string;
}

interface Step {
  nodes: number;
  rps: number;
  perNode: { rps: number; p50: number; p99: number; failed: number }[];
}

async function main(): Promise<void> {
  const mongo = new MongoTestServer();
  await mongo.start();
  const storeUrl = mongo.uri(mongo.freshDatabase());
  const nodes: Node[] = [];
  const load = new LoadGenerator();
  const steps: Step[] = [];
  try {
    const first = await startNode(storeUrl);
    nodes.push(first);
    await createClient(first.url);
    steps.push(await measure(load, nodes));
    nodes.push(await startNode(storeUrl, first.url));
    steps.push(await measure(load, nodes));
  } finally {
    load.close();
    for (const node of nodes) await stopNode(node);
    await mongo.stop();
  }
  report(steps, mongo.ferretdbVersion);
}

async function startNode(storeUrl: string, issuer?: string): Promise<Node> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(os.tmpdir(), 'arbiter-scale-'));
  const url = `http://127.0.0.1:${port}`;
  const child = await startServerProcess({
    port,
    dataDir,
    env: { STORE_URL: storeUrl, ISSUER: issuer ?? url, AUTH_FAILURE_LIMIT: '1000000' },
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

/** Every node answers a token request correctly, then all of them are loaded at once. */
async function measure(load: LoadGenerator, nodes: Node[]): Promise<Step> {
  for (const node of nodes) {
    const response = await fetch(`${node.url}/token`, { method: 'POST', ...TOKEN_REQUEST });
    const body = (await response.json()) as { access_token?: unknown };
    if (response.status !== 200 || typeof body.access_token !== 'string')
      throw new Error(`${node.url}: ${response.status} ${JSON.stringify(body)}`);
  }
  const connections = Math.max(1, Math.floor(CONNECTIONS / nodes.length));
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
  const perNode = runs.map(({ measured }: { measured: LoadResult }) => ({
    rps: Math.round(measured.rps),
    p50: measured.p50,
    p99: measured.p99,
    failed: measured.errors + measured.non2xx,
  }));
  const step = { nodes: nodes.length, rps: perNode.reduce((sum, node) => sum + node.rps, 0), perNode };
  console.log(
    `${step.nodes} node(s): ${step.rps} req/s in all; ${perNode.map((node, i) => `node ${i + 1} ${node.rps} req/s p50 ${node.p50} ms p99 ${node.p99} ms${node.failed ? ` ${node.failed} failed` : ''}`).join('; ')}`,
  );
  return step;
}

function report(steps: Step[], ferretdbVersion: string | undefined): void {
  const [one, two] = steps;
  const growth = Math.round((two.rps / one.rps) * 100) / 100;
  console.log(
    `\n2 nodes / 1 node: ${growth}x (${os.cpus().length} CPUs, store ${ferretdbVersion ? `FerretDB ${ferretdbVersion}` : 'MongoDB'}, ${CONNECTIONS} connections, ${SECONDS} s windows)`,
  );
  const directory = join(dirname(fileURLToPath(import.meta.url)), 'results');
  mkdirSync(directory, { recursive: true });
  const file = join(directory, `scale-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    `${JSON.stringify({ cpus: os.cpus().length, store: ferretdbVersion ? `FerretDB ${ferretdbVersion}` : 'MongoDB', connections: CONNECTIONS, seconds: SECONDS, growth, steps }, null, 2)}\n`,
  );
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
