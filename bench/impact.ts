/**
 * Impact analysis against a real Arbiter (SQLite store, managed OPA, Rego in process): how long
 * POST /admin/api/policy-impact takes to replay 10,000 recorded decisions (goal: at most 10 s), how
 * long 100,000 take, and how much a 100,000-decision replay slows live traffic while it runs
 * (goal: client_credentials throughput at least 0.8x of the same load without it).
 *
 *   npm run bench:impact
 *   BENCH_SECONDS=10 BENCH_CONNECTIONS=64 npm run bench:impact
 *
 * The recorded traffic is real: client_credentials requests of IMPACT_CLIENTS clients asking for
 * "read", "read write" or "write", until RECORDED decisions are in the audit log; the 100,000 are
 * those entries copied (new ids, times just before) to make the longer history of the same traffic.
 * The change replayed is the pack's token rule without the scope "write" (a third of the decisions
 * narrower, a sixth denied). Throughput is measured with autocannon in a child process
 * (bench/load.ts) in five windows in turn: without a replay, with a 100,000-decision replay running,
 * without, with, without; the ratio is of the means (the machine's other load moves between windows).
 * This is a benchmark, not a test: it reports and exits 0.
 */
import { readFileSync } from 'node:fs';
import bcrypt from 'bcryptjs';
import { AUDIT_LOG_COLLECTION, type AuditEntry } from '../src/audit/index.js';
import { DEFAULT_TENANT } from '../src/store/index.js';
import { basic, FORM } from '../test/support/oauth.js';
import { startTestServer, type TestServer } from '../test/support/server.js';
import { LoadGenerator, type LoadResult } from './load.js';
import { clientCredentialsWindow } from './servers.js';
import { writeResults } from './stats.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
/** Each window of live traffic. */
const WINDOW = { connections: CONNECTIONS, seconds: SECONDS };
const RECORDED = 10_000;
const LONG_HISTORY = 100_000;
const IMPACT_CLIENTS = 20;
const SCOPES = ['read', 'read write', 'read', 'write', 'read write', 'read'];
const GOALS = { replay10kSeconds: 10, liveRatio: 0.8 };

const TOKEN_RULE = 'arbiter/token/token.rego';
const PACK_TOKEN_RULE = readFileSync(new URL('../policies/arbiter/token/token.rego', import.meta.url), 'utf8');
const WITHOUT_WRITE = PACK_TOKEN_RULE.replace(
  'machine_scopes := lib.scopes_granted(requested, allowed, allowed) - lib.user_only_scopes',
  'machine_scopes := (lib.scopes_granted(requested, allowed, allowed) - lib.user_only_scopes) - {"write"}',
);
const CHANGE = {
  changes: [
    { collection: 'policy-rules', op: 'replace', record: { kind: 'rego', path: TOKEN_RULE, content: WITHOUT_WRITE } },
  ],
};

interface Client {
  id: string;
  secret: string;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  // POLICY_REPLAY_SHARE (and the other settings of the replay) as the environment gives them.
  const server = await startTestServer(
    Object.fromEntries(
      ['POLICY_REPLAY_SHARE'].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : [])),
    ),
  );
  const load = new LoadGenerator();
  try {
    await server.waitUntilReady();
    const clients = await makeClients(server);
    console.log(`recording ${RECORDED} client_credentials decisions…`);
    await record(server, clients, RECORDED);

    const replays = {
      first10k: await replay(server, RECORDED),
      again10k: await replay(server, RECORDED),
    };
    console.log(`copying the recorded entries to a history of ${LONG_HISTORY}…`);
    await lengthenHistory(server, LONG_HISTORY);
    const replay100k = await replay(server, LONG_HISTORY);

    console.log('live traffic: without a replay, with a 100,000-decision replay running, in turn…');
    const machine = clients[0]!;
    const windows: { replay: boolean; load: LoadResult; replayed?: ReplayResult }[] = [];
    for (const withReplay of [false, true, false, true, false]) {
      if (!withReplay) {
        windows.push({ replay: false, load: await clientCredentialsWindow(load, server.url, machine, WINDOW) });
        continue;
      }
      const running = replay(server, LONG_HISTORY);
      const measured = await clientCredentialsWindow(load, server.url, machine, WINDOW);
      windows.push({ replay: true, load: measured, replayed: await running });
    }
    const meanRps = (replaying: boolean) => {
      const chosen = windows.filter((each) => each.replay === replaying);
      return chosen.reduce((sum, each) => sum + each.load.rps, 0) / chosen.length;
    };
    const ratio = meanRps(true) / meanRps(false);
    const underLoad = windows.find((each) => each.replayed)!.replayed!;
    const results = {
      replayShare: server.config.policyReplayShare,
      replay: { ...replays, long100k: replay100k, long100kUnderLoad: underLoad },
      live: {
        windows: windows.map((each) => ({ replay: each.replay, rps: Math.round(each.load.rps), p99: each.load.p99 })),
        withoutRps: Math.round(meanRps(false)),
        withRps: Math.round(meanRps(true)),
        ratio,
        replaysOutlastedWindows: windows.every((each) => !each.replayed || each.replayed.wallSeconds > SECONDS),
      },
      detail: windows,
      goals: {
        replay10k: replays.again10k.wallSeconds <= GOALS.replay10kSeconds ? 'met' : 'MISSED',
        live: ratio >= GOALS.liveRatio ? 'met' : 'MISSED',
      },
    };
    report(results);
    const file = writeResults('impact', startedAt, results);
    console.log(`written to ${file}`);
  } finally {
    load.close();
    await server.close();
  }
}

async function makeClients(server: TestServer): Promise<Client[]> {
  const clients: Client[] = [];
  for (let index = 0; index < IMPACT_CLIENTS; index++) {
    const client = { id: `impact-bench-${index}`, secret: `impact-bench-secret-${index}` };
    const created = await server.admin('POST', '/clients', {
      clientId: client.id,
      clientType: 'confidential',
      clientSecret: bcrypt.hashSync(client.secret, 10),
      scopes: ['read', 'write'],
    });
    if (created.status !== 201) throw new Error(`client not created: ${JSON.stringify(created.body)}`);
    clients.push(client);
  }
  return clients;
}

/** Real requests, 32 at a time, until `count` decisions are recorded. */
async function record(server: TestServer, clients: Client[], count: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < count; index = next++) {
      const client = clients[index % clients.length]!;
      const response = await server.request('/token', {
        method: 'POST',
        headers: { ...FORM, Authorization: basic(client.id, client.secret) },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          scope: SCOPES[index % SCOPES.length]!,
        }).toString(),
      });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`recording failed: ${response.status}`);
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
}

/** The recorded entries copied under new ids, each a little older than the oldest, until there are `total`. */
async function lengthenHistory(server: TestServer, total: number): Promise<void> {
  const entries = server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
  const originals = (await entries.find({ endpoint: '/token' })).filter((entry) => entry.policyDecision);
  let made = originals.length;
  let round = 1;
  while (made < total) {
    const batch = originals.slice(0, total - made).map((entry) => ({
      ...entry,
      id: 10_000_000 * round + entry.id,
      createdAt: new Date(Date.parse(entry.createdAt) - round * 3_600_000).toISOString(),
    }));
    for (let start = 0; start < batch.length; start += 1000) await entries.insertMany(batch.slice(start, start + 1000));
    made += batch.length;
    round += 1;
  }
}

interface ReplayResult {
  limit: number;
  replayed: number;
  changed: number;
  /** As the client saw it, and as the server reports it (check of the change included). */
  wallSeconds: number;
  serverMs: number;
  decisionsPerSecond: number;
}

async function replay(server: TestServer, limit: number): Promise<ReplayResult> {
  const started = performance.now();
  const answer = await server.admin('POST', '/policy-impact', { ...CHANGE, limit });
  const wallSeconds = (performance.now() - started) / 1000;
  if (answer.status !== 200) throw new Error(`impact analysis failed: ${answer.status} ${JSON.stringify(answer.body)}`);
  const { replayed, changed, ms } = answer.body as { replayed: number; changed: unknown[]; ms: number };
  return {
    limit,
    replayed,
    changed: changed.length,
    wallSeconds: round(wallSeconds),
    serverMs: ms,
    decisionsPerSecond: Math.round(replayed / wallSeconds),
  };
}

function report(results: any): void {
  const r = results.replay;
  const line = (name: string, each: ReplayResult) =>
    `${name.padEnd(44)}${String(each.replayed).padStart(9)}${String(each.changed).padStart(9)}${each.wallSeconds.toFixed(2).padStart(10)}${String(each.decisionsPerSecond).padStart(12)}`;
  console.log(
    `\n${'replay'.padEnd(44)}${'decisions'.padStart(9)}${'changed'.padStart(9)}${'seconds'.padStart(10)}${'decisions/s'.padStart(12)}`,
  );
  console.log(line('10,000 (first: candidate compiled)', r.first10k));
  console.log(line('10,000 (again)', r.again10k));
  console.log(line('100,000, idle', r.long100k));
  console.log(line('100,000, under client_credentials load', r.long100kUnderLoad));
  const live = results.live;
  console.log(
    `\nclient_credentials req/s, windows in turn: ${live.windows.map((each: any) => `${each.rps}${each.replay ? ' (replay running)' : ''}`).join(', ')}`,
  );
  console.log(
    `mean without ${live.withoutRps}, with a replay running ${live.withRps}: ratio ${live.ratio.toFixed(2)} (goal ≥ ${GOALS.liveRatio}: ${results.goals.live}); every replay outlasted its window: ${live.replaysOutlastedWindows}`,
  );
  console.log(
    `10,000 replayed in ${r.again10k.wallSeconds} s (goal ≤ ${GOALS.replay10kSeconds} s: ${results.goals.replay10k})`,
  );
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}

await main();
