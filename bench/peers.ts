/**
 * Arbiter beside its peers, in one run, on the two paths every deployment lives on:
 * client_credentials (client_secret_basic) and the introspection of a valid token, the latter
 * both for one hot token and for BENCH_MANY_TOKENS (2,000) tokens introspected in turn.
 *
 *   - the bare oidc-provider doing the same work (baseline.ts, in this process, in memory);
 *   - Arbiter as `npm start` runs it (src/main.ts, SQLite, managed OPA, a policy decision and an
 *     audit entry per request) with WORKERS=1 and with WORKERS=<the cores available>;
 *   - Ory Hydra 2.3.0 with its defaults on SQLite (hydra.ts; built by scripts/hydra.sh), its
 *     introspection on the admin port, which authenticates no caller and decides nothing.
 *
 *   npm run bench:peers                    5 rounds of 4 s per scenario and server, 64 connections
 *   BENCH_ROUNDS=3 BENCH_SECONDS=10 npm run bench:peers
 *
 * Every server is started first and left idle while another is measured. The machine may be
 * shared (other work comes and goes within seconds), so each scenario is measured in rounds: in
 * a round every server has one window of BENCH_SECONDS after its warm-up, one after the other in
 * an order that rotates from round to round, and a ratio between two servers is taken within each
 * round (under about the same outside load), then the median over the rounds; a server's req/s
 * and p99 are its medians. The load is autocannon in a child process (load.ts), on the same
 * machine: on 2 cores it takes a share of them from the servers. The table goes to stdout and
 * bench/results/peers-<time>.json.
 */
import os from 'node:os';
import { loadConfig } from '../src/config/index.js';
import { basic, FORM } from '../test/support/oauth.js';
import { startHydra, type HydraTarget } from './hydra.js';
import { LoadGenerator, type LoadResult } from './load.js';
import { benchClients, startArbiter, startBaselineTarget, type BenchClients, type Target } from './servers.js';
import { median, writeResults } from './stats.js';

const SECONDS = positive('BENCH_SECONDS', 4);
const ROUNDS = positive('BENCH_ROUNDS', 5);
const CONNECTIONS = positive('BENCH_CONNECTIONS', 64);
const WARMUP_SECONDS = positive('BENCH_WARMUP_SECONDS', Math.min(2, SECONDS));
const CORES = Math.max(2, os.availableParallelism());
const TARGETS = {
  workersScaling: 1.3,
  clientCredentialsVsHydra: 2,
  introspectionVsHydra: 1.2,
  perWorkerVsLibrary: 0.5,
};

/** How many distinct tokens the many-tokens scenario introspects, each in turn. */
const MANY_TOKENS = positive('BENCH_MANY_TOKENS', 2000);

/** One scenario's requests at one server: the same body every time, or each of `bodies` in turn. */
interface PeerRequest {
  url: string;
  headers: Record<string, string>;
  body?: string;
  bodies?: string[];
}

/** One server as the table shows it, and how it is asked. */
interface Peer {
  label: string;
  kind: 'baseline' | 'arbiter1' | 'arbiterN' | 'hydra';
  /** Gets MANY_TOKENS tokens of its own (client_credentials) for the many-tokens scenario. */
  mintTokens(): Promise<void>;
  request(scenario: ScenarioName): PeerRequest;
}

const CLIENT_CREDENTIALS = 'client_credentials, client_secret_basic';
const ONE_TOKEN = 'introspection of a valid token';
const MANY = `introspection of ${MANY_TOKENS} tokens in turn`;
type ScenarioName = typeof CLIENT_CREDENTIALS | typeof ONE_TOKEN | typeof MANY;
/**
 * The two paths, and introspection again over many tokens: one hot token is what a
 * resource server sees from one busy client (Arbiter keeps a token's read for the event-loop turn,
 * see the README), many tokens in turn is the same work without that.
 */
const SCENARIOS: ScenarioName[] = [CLIENT_CREDENTIALS, ONE_TOKEN, MANY];

/** One window of one server in one round. */
interface Row {
  scenario: ScenarioName;
  round: number;
  server: string;
  kind: Peer['kind'];
  result: LoadResult;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const clients = await benchClients();
  const load = new LoadGenerator();
  const closers: (() => Promise<void>)[] = [];
  try {
    const baseline = await startBaselineTarget(clients, loadConfig({}).ttl);
    closers.push(() => baseline.close());
    const arbiter1 = await startArbiter(clients, { workers: 1 });
    closers.push(() => arbiter1.close());
    const arbiterN = await startArbiter(clients, { workers: CORES });
    closers.push(() => arbiterN.close());
    const hydra = await startHydra();
    closers.push(() => hydra.close());
    const peers: Peer[] = [
      oidcPeer('bare oidc-provider', 'baseline', baseline, clients),
      oidcPeer('Arbiter WORKERS=1', 'arbiter1', arbiter1, clients),
      oidcPeer(`Arbiter WORKERS=${CORES}`, 'arbiterN', arbiterN, clients),
      hydraPeer(hydra),
    ];
    for (const peer of peers) await peer.mintTokens();
    const rows: Row[] = [];
    for (const scenario of SCENARIOS) {
      for (const peer of peers) await checkAnswer(peer, scenario);
      for (let round = 0; round < ROUNDS; round += 1) {
        const order = peers.map((_, index) => peers[(index + round) % peers.length]!);
        for (const peer of order) {
          const run = await load.run({
            ...peer.request(scenario),
            cycle: true,
            method: 'POST',
            connections: CONNECTIONS,
            warmupSeconds: WARMUP_SECONDS,
            seconds: SECONDS,
          });
          const { rps, p99, errors, non2xx } = run.measured;
          console.error(
            `  ${scenario} · round ${round + 1} · ${peer.label}: ${rps.toFixed(0)} req/s, p99 ${p99} ms, ${errors + non2xx} errors`,
          );
          rows.push({ scenario, round, server: peer.label, kind: peer.kind, result: run.measured });
        }
      }
    }
    const totalSeconds = (Date.now() - startedAt.getTime()) / 1000;
    console.log(table(rows));
    console.log(`\n${writeRun(startedAt, totalSeconds, rows)} (${totalSeconds.toFixed(0)} s in all)`);
  } finally {
    load.close();
    for (const close of closers.reverse()) await close().catch(() => undefined);
  }
}

/** The baseline and Arbiter take the same requests: the machine client's token, introspected by the resource server (Basic). */
function oidcPeer(label: string, kind: Peer['kind'], target: Target, clients: BenchClients): Peer {
  const machine = { ...FORM, authorization: basic(clients.machine.id, clients.machine.secret) };
  const resourceServer = { ...FORM, authorization: basic(clients.resourceServer.id, clients.resourceServer.secret) };
  return peerOf(label, kind, {
    token: { url: `${target.url}/token`, headers: machine },
    introspection: { url: `${target.url}/introspect`, headers: resourceServer },
    validToken: target.validToken,
  });
}

function hydraPeer(hydra: HydraTarget): Peer {
  return peerOf('Ory Hydra 2.3.0', 'hydra', {
    token: { url: `${hydra.url}/oauth2/token`, headers: { ...FORM, authorization: hydra.machine } },
    introspection: { url: `${hydra.adminUrl}/admin/oauth2/introspect`, headers: FORM },
    validToken: hydra.validToken,
  });
}

interface Endpoint {
  url: string;
  headers: Record<string, string>;
}

function peerOf(
  label: string,
  kind: Peer['kind'],
  { token, introspection, validToken }: { token: Endpoint; introspection: Endpoint; validToken: string },
): Peer {
  const clientCredentials = 'grant_type=client_credentials&scope=read';
  const introspect = (value: string) => new URLSearchParams({ token: value }).toString();
  let many: string[] = [];
  return {
    label,
    kind,
    async mintTokens() {
      many = [];
      while (many.length < MANY_TOKENS) {
        const batch = await Promise.all(
          Array.from({ length: Math.min(32, MANY_TOKENS - many.length) }, async () => {
            const response = await fetch(token.url, {
              method: 'POST',
              headers: token.headers,
              body: clientCredentials,
            });
            const { access_token: value } = (await response.json()) as { access_token?: string };
            if (typeof value !== 'string') throw new Error(`${label} issued no token (${response.status})`);
            return value;
          }),
        );
        many.push(...batch);
      }
    },
    request(scenario) {
      if (scenario === CLIENT_CREDENTIALS) return { ...token, body: clientCredentials };
      if (scenario === ONE_TOKEN) return { ...introspection, body: introspect(validToken) };
      return { ...introspection, bodies: many.map(introspect) };
    },
  };
}

/** One request as the load will send it: 200, and a token or an active introspection. */
async function checkAnswer(peer: Peer, scenario: ScenarioName): Promise<void> {
  const { url, headers, body: one, bodies } = peer.request(scenario);
  const body = one ?? bodies![0];
  const response = await fetch(url, { method: 'POST', headers, body });
  const answer = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  const right =
    response.status === 200 &&
    (scenario === CLIENT_CREDENTIALS
      ? typeof answer.access_token === 'string' && answer.scope === 'read'
      : answer.active === true && answer.scope === 'read');
  if (!right) throw new Error(`${scenario} at ${peer.label}: ${response.status} ${JSON.stringify(answer)}`);
}

function table(rows: Row[]): string {
  const lines = [
    `\n${ROUNDS} rounds of ${SECONDS} s per scenario and server (each after ${WARMUP_SECONDS} s of warm-up), ${CONNECTIONS} connections, loopback, ${os.cpus().length} CPUs (the load generator on the same machine), Node ${process.version}; medians over the rounds, ratios taken within each round`,
    '',
    `${'scenario'.padEnd(40)} ${'server'.padEnd(20)} ${'req/s'.padStart(7)} ${'p50 ms'.padStart(7)} ${'p99 ms'.padStart(7)} ${'errors'.padStart(7)} ${'x library'.padStart(10)} ${'x Hydra'.padStart(8)}`,
  ];
  const verdicts: string[] = [];
  const mark = (ok: boolean) => (ok ? 'met' : 'MISSED');
  for (const scenario of SCENARIOS) {
    const windows = (kind: Peer['kind']) =>
      rows.filter((row) => row.scenario === scenario && row.kind === kind).sort((a, b) => a.round - b.round);
    /** The median over the rounds of `kind`'s req/s divided by `other`'s in the same round. */
    const ratio = (kind: Peer['kind'], other: Peer['kind']) =>
      median(windows(kind).map((row, round) => row.result.rps / windows(other)[round]!.result.rps));
    for (const [index, kind] of (['baseline', 'arbiter1', 'arbiterN', 'hydra'] as const).entries()) {
      const own = windows(kind);
      const errors = own.reduce((sum, row) => sum + row.result.errors + row.result.non2xx, 0);
      lines.push(
        `${(index === 0 ? scenario : '').padEnd(40)} ${own[0]!.server.padEnd(20)} ${median(
          own.map((row) => row.result.rps),
        )
          .toFixed(0)
          .padStart(7)} ${median(own.map((row) => row.result.p50))
          .toFixed(1)
          .padStart(7)} ${median(own.map((row) => row.result.p99))
          .toFixed(1)
          .padStart(
            7,
          )} ${String(errors).padStart(7)} ${ratio(kind, 'baseline').toFixed(2).padStart(10)} ${ratio(kind, 'hydra').toFixed(2).padStart(8)}`,
      );
    }
    const scaling = ratio('arbiterN', 'arbiter1');
    const vsHydra = ratio('arbiterN', 'hydra');
    const perWorker = ratio('arbiter1', 'baseline');
    const clientCredentials = scenario === CLIENT_CREDENTIALS;
    const hydraTarget = clientCredentials ? TARGETS.clientCredentialsVsHydra : TARGETS.introspectionVsHydra;
    verdicts.push(
      `${scenario}: WORKERS=${CORES} ${scaling.toFixed(2)}x WORKERS=1` +
        (clientCredentials ? ` (target ≥ ${TARGETS.workersScaling}: ${mark(scaling >= TARGETS.workersScaling)})` : '') +
        `; ${vsHydra.toFixed(2)}x Hydra (target ≥ ${hydraTarget}: ${mark(vsHydra >= hydraTarget)})` +
        `; WORKERS=1 ${perWorker.toFixed(2)}x the library (target ≥ ${TARGETS.perWorkerVsLibrary}: ${mark(perWorker >= TARGETS.perWorkerVsLibrary)})`,
    );
  }
  return [...lines, '', ...verdicts].join('\n');
}

function writeRun(startedAt: Date, totalSeconds: number, rows: Row[]): string {
  return writeResults('peers', startedAt, {
    totalSeconds,
    settings: {
      rounds: ROUNDS,
      seconds: SECONDS,
      warmupSeconds: WARMUP_SECONDS,
      connections: CONNECTIONS,
      workers: CORES,
    },
    targets: TARGETS,
    results: rows,
  });
}

function positive(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  return value;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
