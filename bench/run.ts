/**
 * What Arbiter's policy, store and audit cost on top of oidc-provider: every hot-path scenario
 * against a real Arbiter (SQLite store, managed OPA, audit log; client secrets BCrypt cost 10) and
 * against a bare oidc-provider configured for the same work (baseline.ts), both on loopback,
 * started here and measured in the same run, alternately.
 *
 *   npm run bench                          10 s per scenario and server, 64 connections
 *   BENCH_SECONDS=3 npm run bench          a quick run
 *   BENCH_CONNECTIONS=16 BENCH_WARMUP_SECONDS=3 npm run bench
 *   BENCH_SCENARIOS=introspect,refresh npm run bench     only the scenarios whose names contain one of these
 *   BENCH_BASELINE_STORE=sqlite:/tmp/baseline.db npm run bench   the baseline keeps its tokens in Arbiter's store (STORE_URL form)
 *
 * Every scenario's answer is checked once on both servers before it is measured. The load comes
 * from autocannon in a child process (load.ts), so that the client does not share the servers'
 * event loop; each measurement is one run on the same connections: BENCH_WARMUP_SECONDS (default
 * 2) of warm-up, then the measured window of BENCH_SECONDS, of which only the responses received
 * within the window count. The servers alternate: the first scenario starts with Arbiter, the
 * next with the baseline, and so on. A full garbage collection precedes each run.
 *
 * The code exchange consumes what it sends: a code per request, made ahead the same way on both
 * servers (servers.ts: one authorization request with the signed-in session per code), outside
 * the timing. Two short probes tell each server's rate, and the pool holds POOL_MARGIN times what
 * warm-up and window need at that rate; a pool that runs out anyway shortens that window, which
 * the table says. Refresh requests take turns over refresh tokens made ahead (one code exchange
 * each): a confidential client's refresh token is not rotated, so it is not consumed (scenarios.ts).
 *
 * Targets (issue): Arbiter at ≥ 0.7x the baseline's throughput, p99 ≤ 1.5x the baseline's, no
 * errors. The table goes to stdout and, with machine and settings, to bench/results/bench-<time>.json.
 * This is a benchmark, not a test: it exits 0 once every answer was checked, whatever the numbers.
 */
import os from 'node:os';
import v8 from 'node:v8';
import vm from 'node:vm';
import { assertionBodies } from './assertion.js';
import { LoadGenerator, type LoadResult, type LoadRun } from './load.js';
import { BCRYPT_COST, benchClients, startArbiter, startBaselineTarget, type Target } from './servers.js';
import { scenarios, type RequestSpec, type Scenario } from './scenarios.js';
import { writeResults } from './stats.js';

/** A STORE_URL: the baseline then keeps its artefacts in Arbiter's store (its adapter), not in memory. */
const BASELINE_STORE = process.env.BENCH_BASELINE_STORE || undefined;
const SECONDS = positive('BENCH_SECONDS', 10);
const CONNECTIONS = positive('BENCH_CONNECTIONS', 64);
const WARMUP_SECONDS = positive('BENCH_WARMUP_SECONDS', Math.min(2, SECONDS));
/** Requests of a pool scenario's first look at the server's rate. */
const PROBE_REQUESTS = Math.max(2 * CONNECTIONS, 200);
/** How many more codes than the probed rate needs are made ahead. */
const POOL_MARGIN = 1.5;
/** A full collection before each measurement, so that none starts with the garbage of what came before (prep, the other server). */
v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc') as () => void;
const TARGETS = { throughputRatioMin: 0.7, p99RatioMax: 1.5, errors: 0 };

interface Measured {
  server: Target['name'];
  note?: string;
  /** From the start of the run until every connection had had a response (the window starts after that and after the warm-up). */
  connectedSeconds: number | null;
  /** Making the codes or refresh tokens the requests send (outside the timing). */
  prepSeconds: number;
  warmup: LoadResult;
  result: LoadResult;
}

interface ScenarioReport {
  scenario: string;
  arbiter: Measured;
  baseline: Measured;
  throughputRatio: number;
  p99Ratio: number;
  met: { throughput: boolean; p99: boolean; errors: boolean; all: boolean };
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const clients = await benchClients();
  const load = new LoadGenerator();
  const arbiter = await startArbiter(clients);
  let baseline: Target | undefined;
  try {
    baseline = await startBaselineTarget(clients, arbiter.ttl, BASELINE_STORE);
    const reports: ScenarioReport[] = [];
    const only = process.env.BENCH_SCENARIOS;
    for (const [index, scenario] of scenarios(clients).entries()) {
      if (only && !only.split(',').some((part) => scenario.name.includes(part.trim()))) continue;
      // Alternate which server goes first, so that neither always runs on the warmer machine.
      const order = index % 2 === 0 ? [arbiter, baseline] : [baseline, arbiter];
      const measured: Partial<Record<Target['name'], Measured>> = {};
      for (const target of order) {
        measured[target.name] = await measure(load, scenario, target);
        const { result, connectedSeconds } = measured[target.name]!;
        console.error(
          `  ${scenario.name} · ${target.name}: ${result.rps.toFixed(0)} req/s, p99 ${result.p99} ms, ${result.errors + result.non2xx} errors; all connections answered after ${connectedSeconds?.toFixed(1) ?? '-'} s; prep ${measured[target.name]!.prepSeconds.toFixed(1)} s; heap ${heapAfterCollection()} MiB`,
        );
      }
      reports.push(report(scenario, measured.Arbiter!, measured.baseline!));
    }
    const totalSeconds = (Date.now() - startedAt.getTime()) / 1000;
    console.log(table(reports));
    const file = writeRun(startedAt, totalSeconds, reports);
    console.log(`\n${file} (${totalSeconds.toFixed(0)} s in all)`);
  } finally {
    load.close();
    await baseline?.close();
    await arbiter.close();
  }
}

async function measure(load: LoadGenerator, scenario: Scenario, target: Target): Promise<Measured> {
  const spec = scenario.request(target);
  await checkAnswer(scenario, target, spec);
  const job = {
    url: `${target.url}${spec.path}`,
    method: 'POST' as const,
    headers: spec.headers,
    connections: CONNECTIONS,
  };
  let run: LoadRun;
  let prepSeconds = 0;
  if (spec.pool) {
    // Each request consumes a body made ahead, so the pool must outlast warm-up and window: two
    // short probes (the second already warm) tell the rate, the pool holds POOL_MARGIN times what
    // that rate needs, and one more per connection (autocannon builds a request ahead).
    const pool = async (count: number) => {
      const began = performance.now();
      const bodies = await spec.pool!(count);
      prepSeconds += (performance.now() - began) / 1000;
      return bodies;
    };
    const probe = async (requests: number) =>
      load.run({ ...job, bodies: await pool(requests + CONNECTIONS), warmupSeconds: 0, seconds: 60 });
    const first = await probe(PROBE_REQUESTS);
    const second = await probe(Math.max(PROBE_REQUESTS, Math.round(first.overallRps)));
    const rate = Math.max(first.overallRps, second.overallRps);
    const warmup = Math.max(WARMUP_SECONDS, second.connectedSeconds ?? 0);
    const bodies = await pool(Math.ceil(rate * (warmup + SECONDS) * POOL_MARGIN) + CONNECTIONS);
    collectGarbage();
    run = await load.run({ ...job, bodies, warmupSeconds: WARMUP_SECONDS, seconds: SECONDS });
  } else {
    const began = performance.now();
    const bodies = spec.cycle ? await spec.cycle() : undefined;
    prepSeconds = (performance.now() - began) / 1000;
    collectGarbage();
    run = await load.run({
      ...job,
      body: spec.body,
      bodies,
      cycle: bodies !== undefined,
      assertion: spec.assertion,
      warmupSeconds: WARMUP_SECONDS,
      seconds: SECONDS,
    });
  }
  return {
    server: target.name,
    note: spec.note,
    connectedSeconds: run.connectedSeconds,
    prepSeconds,
    warmup: run.warmup,
    result: run.measured,
  };
}

/** One request of the scenario, as the load will send it: 200 and the answer the scenario expects. */
async function checkAnswer(scenario: Scenario, target: Target, spec: RequestSpec): Promise<void> {
  const body = spec.pool
    ? (await spec.pool(1))[0]
    : spec.cycle
      ? (await spec.cycle())[0]
      : spec.assertion
        ? assertionBodies(spec.assertion)()
        : spec.body;
  const response = await fetch(`${target.url}${spec.path}`, { method: 'POST', headers: spec.headers, body });
  const text = await response.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // reported below
  }
  const wrong = response.status !== 200 ? `status ${response.status}` : scenario.check(parsed, body ?? '');
  if (wrong) throw new Error(`${scenario.name} at ${target.name}: ${wrong}: ${text.slice(0, 500)}`);
}

function report(scenario: Scenario, arbiter: Measured, baseline: Measured): ScenarioReport {
  const throughputRatio = arbiter.result.rps / baseline.result.rps;
  const p99Ratio = arbiter.result.p99 / baseline.result.p99;
  const errors = arbiter.result.errors + arbiter.result.non2xx + baseline.result.errors + baseline.result.non2xx;
  const met = {
    throughput: throughputRatio >= TARGETS.throughputRatioMin,
    p99: p99Ratio <= TARGETS.p99RatioMax,
    errors: errors <= TARGETS.errors,
  };
  return {
    scenario: scenario.name,
    arbiter,
    baseline,
    throughputRatio,
    p99Ratio,
    met: { ...met, all: met.throughput && met.p99 && met.errors },
  };
}

function table(reports: ScenarioReport[]): string {
  const columns: [string, number][] = [
    ['scenario', 40],
    ['server', 10],
    ['req/s', 8],
    ['p50 ms', 8],
    ['p99 ms', 8],
    ['errors', 8],
    ['x req/s', 14],
    ['x p99', 14],
  ];
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i < 2 ? cell.padEnd(columns[i]![1]) : cell.padStart(columns[i]![1])))
      .join(' ')
      .trimEnd();
  const errors = (result: LoadResult) => String(result.errors + result.non2xx);
  const mark = (ok: boolean) => (ok ? 'met' : 'MISSED');
  const lines = [
    `\n${SECONDS} s per scenario and server after ${WARMUP_SECONDS} s of warm-up on the same connections, ${CONNECTIONS} connections, loopback, ${os.cpus().length} CPUs, Node ${process.version}`,
    `Arbiter: SQLite, managed OPA, audit, secrets BCrypt cost ${BCRYPT_COST} · baseline: bare oidc-provider, ${BASELINE_STORE ? `artefacts in Arbiter's store ${BASELINE_STORE}` : 'in-memory'}, plain secrets`,
    `targets: Arbiter ≥ ${TARGETS.throughputRatioMin}x the baseline's req/s, p99 ≤ ${TARGETS.p99RatioMax}x the baseline's, no errors (errors = connection errors, timeouts and non-2xx)\n`,
    line(columns.map(([name]) => name)),
  ];
  const notes: string[] = [];
  for (const entry of reports) {
    const { arbiter, baseline } = entry;
    const baselineName = baseline.note ? `baseline*` : 'baseline';
    if (baseline.note) notes.push(`* ${entry.scenario}: the baseline's request is different (${baseline.note}).`);
    for (const { server, result } of [baseline, arbiter]) {
      if (result.exhausted)
        notes.push(
          `! ${entry.scenario}, ${server}: the codes or tokens made ahead ran out after ${result.seconds.toFixed(1)} s of the window.`,
        );
    }
    lines.push(
      line([
        entry.scenario,
        baselineName,
        baseline.result.rps.toFixed(0),
        baseline.result.p50.toFixed(1),
        baseline.result.p99.toFixed(1),
        errors(baseline.result),
        '',
        '',
      ]),
    );
    lines.push(
      line([
        '',
        'Arbiter',
        arbiter.result.rps.toFixed(0),
        arbiter.result.p50.toFixed(1),
        arbiter.result.p99.toFixed(1),
        errors(arbiter.result) + (entry.met.errors ? '' : ' MISSED'),
        `${entry.throughputRatio.toFixed(2)} ${mark(entry.met.throughput)}`,
        `${entry.p99Ratio.toFixed(2)} ${mark(entry.met.p99)}`,
      ]),
    );
  }
  const met = reports.filter((entry) => entry.met.all).length;
  notes.push(
    "code exchange: a code of its own per request, made ahead by an authorization request with the signed-in session; refresh: 512 refresh tokens in turn (a confidential client's are not rotated).",
  );
  lines.push('', ...notes, `every target met in ${met} of ${reports.length} scenarios`);
  return lines.join('\n');
}

function writeRun(startedAt: Date, totalSeconds: number, reports: ScenarioReport[]): string {
  return writeResults('bench', startedAt, {
    totalSeconds,
    settings: {
      seconds: SECONDS,
      warmupSeconds: WARMUP_SECONDS,
      poolProbeRequests: PROBE_REQUESTS,
      connections: CONNECTIONS,
      loadGenerator: 'autocannon in a child process',
      arbiter: { store: 'sqlite', policy: 'managed OPA', bcryptCost: BCRYPT_COST },
      baseline: {
        server: 'bare oidc-provider, same process, own loopback port',
        adapter: BASELINE_STORE
          ? `Arbiter's oidc adapter over ${BASELINE_STORE}`
          : "oidc-provider's MemoryAdapter over an LRU of 50M entries",
        secrets: 'plain',
      },
    },
    targets: TARGETS,
    results: reports,
  });
}

function heapAfterCollection(): number {
  collectGarbage();
  return Math.round(process.memoryUsage().heapUsed / 2 ** 20);
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
