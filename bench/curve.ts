/**
 * The cost curve (issue 36): each dimension of scale small and large in one run, as two Arbiter
 * processes side by side (WORKERS=1, SQLite, seeded through the store code before either starts;
 * the dimensions' files say how: bench/curve-policy.ts, curve-clients-tenants.ts, curve-store.ts),
 * measured in alternating rounds (small then large, then large then small, …). Two kinds:
 *
 * - throughput (policy, clients, tenants): the same client_credentials load on each side in turn
 *   (autocannon, BENCH_CONNECTIONS); the goal is on the large side's ratio to the small one, the
 *   median of the per-round ratios; each server's RSS is read after each round;
 * - latency (purge, audit): CURVE_CONNECTIONS steady /token callers beside what the side does (a
 *   purge to wait out, audit pages to read); the goal is on the large side's worst latency.
 *
 * Prints one table (each figure of each side, the ratio, the goal) with the machine's load, and
 * writes the run through writeResults. A benchmark, not a test: it exits 0 once every side
 * answered its first request, whatever the figures.
 *
 *   npm run bench:curve
 *   CURVE_DIMENSIONS=policy,clients CURVE_ROUNDS=3 BENCH_SECONDS=10 npm run bench:curve
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { clientsAndTenants } from './curve-clients-tenants.js';
import { policySize } from './curve-policy.js';
import { purgeAndAudit } from './curve-store.js';
import { LoadGenerator, type LoadJob } from './load.js';
import { median, percentile, writeResults } from './stats.js';

const SECONDS = positive('BENCH_SECONDS', 10);
const ROUNDS = positive('CURVE_ROUNDS', 3);
const CONNECTIONS = positive('BENCH_CONNECTIONS', 32);
const WARMUP_SECONDS = positive('BENCH_WARMUP_SECONDS', 3);
/** Concurrent callers of a latency dimension's steady load. */
const STEADY_CONNECTIONS = positive('CURVE_CONNECTIONS', 4);

export type Size = 'small' | 'large';

/** The request a side is measured with (and its pool of bodies and paths, taken in turn). */
type SideJob = Omit<LoadJob, 'connections' | 'warmupSeconds' | 'seconds'>;

/** What a latency side does beside the steady load: when its window starts (default: with the load), and its own timings (ms). */
export interface Beside {
  from?: number;
  timings?: Record<string, number[]>;
}

/** One side of a dimension: a seeded store, the server to start on it, and the request that measures it. */
export interface CurveSide {
  label: string;
  job: SideJob;
  /** Latency dimensions: resolves when the window ends. */
  beside?: () => Promise<Beside>;
  /** Starts the server; answers its process id (whose memory is read). */
  start(): Promise<number>;
  close(): Promise<void>;
}

/** A goal of the issue, on a figure: the ratio large/small at least, or the large side's value at most or below. */
interface Goal {
  figure: string;
  of: 'ratio' | 'large';
  atLeast?: number;
  atMost?: number;
  below?: number;
}

export interface CurveDimension {
  name: string;
  kind: 'throughput' | 'latency';
  goals: Goal[];
  /** Throughput: send every pooled request once before the rounds (each tenant's provider built: the RSS is theirs). */
  prime?: boolean;
  /** Latency: both sides measured at once, in one round (a purge starts when it will, not when a round does). */
  together?: boolean;
  /** Seeds one side's store (its server not started yet). */
  seed(size: Size): Promise<CurveSide>;
}

const DIMENSIONS: CurveDimension[] = [policySize, ...clientsAndTenants, ...purgeAndAudit];

/** One side's figures in one round, by name. */
type Figures = Record<string, number>;

interface Measured {
  dimension: CurveDimension;
  labels: Record<Size, string>;
  rounds: Record<Size, Figures[]>;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const wanted = process.env.CURVE_DIMENSIONS?.split(',').map((name) => name.trim());
  const unknown = wanted?.filter((name) => !DIMENSIONS.some((dimension) => dimension.name === name)) ?? [];
  if (unknown.length)
    throw new Error(`unknown CURVE_DIMENSIONS ${unknown.join(', ')} (${DIMENSIONS.map((d) => d.name).join(', ')})`);
  const dimensions = DIMENSIONS.filter((dimension) => !wanted || wanted.includes(dimension.name));
  const settings = `${ROUNDS} alternating rounds; throughput: ${SECONDS} s after ${WARMUP_SECONDS} s of warm-up, ${CONNECTIONS} connections; latency: ${STEADY_CONNECTIONS} steady callers; ${os.cpus().length} CPUs, Node ${process.version}`;
  console.log(`cost curve: ${settings}; load ${loadAverage()}`);
  const load = new LoadGenerator();
  const measured: Measured[] = [];
  try {
    for (const dimension of dimensions) measured.push(await measureDimension(dimension, load));
  } finally {
    load.close();
  }
  console.log(`\n${settings}; load at the end ${loadAverage()}\n`);
  console.log(table(measured));
  const file = writeResults('curve', startedAt, {
    settings: { rounds: ROUNDS, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS, connections: CONNECTIONS },
    dimensions: measured.map(({ dimension, labels, rounds }) => ({
      name: dimension.name,
      labels,
      rounds,
      figures: summary({ dimension, labels, rounds }),
    })),
  });
  console.log(`\nwritten to ${file}`);
}

/** Both sides seeded, then both started, then the rounds; the servers stopped whatever happens. */
async function measureDimension(dimension: CurveDimension, load: LoadGenerator): Promise<Measured> {
  const sides: CurveSide[] = [];
  try {
    for (const size of ['small', 'large'] as const) {
      const seeding = Date.now();
      sides.push(await dimension.seed(size));
      progress(`${dimension.name}: seeded ${sides.at(-1)!.label} in ${((Date.now() - seeding) / 1000).toFixed(1)} s`);
    }
    // Started together (a purge comes a set time after its server starts); both awaited before a failure ends the run.
    const started = await Promise.allSettled(sides.map((side) => side.start()));
    const failed = started.find((each) => each.status === 'rejected');
    if (failed) throw failed.reason;
    const pids = started.map((each) => (each as PromiseFulfilledResult<number>).value);
    for (const side of sides) await checkFirstAnswer(side);
    if (dimension.prime) for (const side of sides) await prime(side, load);
    const rounds: Record<Size, Figures[]> = { small: [], large: [] };
    const sizes = ['small', 'large'] as const;
    for (let round = 0; round < (dimension.together ? 1 : ROUNDS); round++) {
      const order = round % 2 === 0 ? [0, 1] : [1, 0];
      const turns = dimension.together ? [order] : order.map((index) => [index]);
      for (const turn of turns) {
        const figures =
          dimension.kind === 'throughput'
            ? [await throughput(sides[turn[0]!]!, pids[turn[0]!]!, load)]
            : await latencyWindow(turn.map((index) => sides[index]!));
        for (const [position, index] of turn.entries()) {
          const measured = figures[position]!;
          rounds[sizes[index]!].push({ ...measured, ...memoryOf(pids[index]!), ...(await heapOf(sides[index]!)) });
          progress(`${dimension.name} · ${sides[index]!.label} · round ${round + 1}: ${brief(measured)}`);
        }
      }
    }
    return { dimension, labels: { small: sides[0]!.label, large: sides[1]!.label }, rounds };
  } finally {
    for (const side of sides) await side.close().catch(() => undefined);
  }
}

/** One request as the load sends it, answered 2xx: a side that refuses it would measure its refusals. */
async function checkFirstAnswer(side: CurveSide): Promise<void> {
  const answer = await send(side.job, 0);
  if (answer.status < 200 || answer.status > 299) throw new Error(`${side.label}: answered ${answer.status}`);
}

/** Every pooled request once (a pass sends all but `connections` of the pool: load-worker.ts; a pool of one is warmed by the warm-up). */
async function prime(side: CurveSide, load: LoadGenerator): Promise<void> {
  if ((side.job.bodies?.length ?? 0) > 4)
    await load.run({ ...side.job, cycle: false, connections: 4, warmupSeconds: 0, seconds: 600 });
}

async function throughput(side: CurveSide, pid: number, load: LoadGenerator): Promise<Figures> {
  const cpuBefore = cpuMsOf(pid);
  const { warmup, measured } = await load.run({
    ...side.job,
    connections: CONNECTIONS,
    warmupSeconds: WARMUP_SECONDS,
    seconds: SECONDS,
  });
  if (measured.non2xx) progress(`${side.label}: statuses ${JSON.stringify(measured.statuses)}`);
  return {
    'req/s': measured.rps,
    'p50 ms': measured.p50,
    'p99 ms': measured.p99,
    'non-2xx': measured.non2xx + measured.errors,
    // The server's CPU per response over the whole run: what a request costs, much less swayed by
    // the machine's other load than req/s (on a shared machine the ratio to read first).
    'CPU ms/req': (cpuMsOf(pid) - cpuBefore) / (warmup.requests + measured.requests),
  };
}

/** CPU time the process used so far (user and system, every thread), ms (/proc/<pid>/stat). */
function cpuMsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime are the stat file's 14th and 15th fields (the 12th and 13th after the command).
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}
/** USER_HZ: Linux reports CPU times in 1/100 s. */
const CLOCK_TICKS = 100;

/**
 * The steady load on each of `sides` until every side's `beside` is done; each side's figures
 * over one window to that end, from the earliest start a side asks for (none of their purges
 * missed), not before every load runs: the worst latency of a window grows with its length on a
 * shared machine, so sides measured together are measured over the same one.
 */
async function latencyWindow(sides: CurveSide[]): Promise<Figures[]> {
  const loads = sides.map((side) => steadyLoad(side.job));
  const besides = await Promise.all(sides.map((side) => side.beside?.() ?? Promise.resolve({} as Beside)));
  const ended = performance.now();
  const calls = await Promise.all(loads.map((each) => each.stop()));
  const asked = besides.flatMap((each) => (each.from === undefined ? [] : [each.from]));
  const from = Math.max(asked.length ? Math.min(...asked) : 0, ...calls.map((each) => each.startedAt));
  return sides.map((side, index) => {
    const inWindow = (at: number) => at >= from;
    const call = calls[index]!;
    const beside = besides[index]!;
    const figures: Figures = {
      ...worst(
        new URL(side.job.url).pathname,
        call.latencies.filter((each) => inWindow(each.at)),
      ),
      'non-2xx': call.failures.filter(inWindow).length,
      'window s': (ended - from) / 1000,
    };
    for (const [name, timings] of Object.entries(beside.timings ?? {}))
      Object.assign(figures, {
        [`${name} max ms`]: highest(timings),
        [`${name} p50 ms`]: percentile(ascending(timings), 50),
      });
    return figures;
  });
}

/** STEADY_CONNECTIONS callers sending the job's requests one after the other, each answer's latency kept. */
function steadyLoad(job: SideJob) {
  const startedAt = performance.now();
  /** When each request was sent (performance.now()) and how long its answer took, ms. */
  const latencies: { at: number; ms: number }[] = [];
  /** When each request that was not answered 2xx was sent. */
  const failures: number[] = [];
  const reasons = new Set<string>();
  let running = true;
  let sent = 0;
  const caller = async () => {
    while (running) {
      const at = performance.now();
      const answer = await send(job, sent++);
      if (answer.status >= 200 && answer.status <= 299) {
        latencies.push({ at, ms: performance.now() - at });
        continue;
      }
      // Counted, and shown once per reason: the figures say how many, the run goes on.
      failures.push(at);
      if (!reasons.has(answer.body)) progress(`${job.url} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
      reasons.add(answer.body);
    }
  };
  const callers = Promise.all(Array.from({ length: STEADY_CONNECTIONS }, caller));
  return {
    async stop() {
      running = false;
      await callers;
      return { startedAt, latencies, failures };
    },
  };
}

/** The job's `index`-th request (its pools taken in turn); a failed connection is status 0. */
async function send(job: SideJob, index: number): Promise<{ status: number; body: string }> {
  const path = job.paths?.length ? job.paths[index % job.paths.length] : null;
  const url = path ? new URL(path, job.url).href : job.url;
  const body = job.bodies?.length ? job.bodies[index % job.bodies.length] : job.body;
  try {
    const answer = await fetch(url, { method: job.method, headers: job.headers, body });
    return { status: answer.status, body: await answer.text() };
  } catch (error) {
    return { status: 0, body: String(error) };
  }
}

function worst(name: string, latencies: { ms: number }[]): Figures {
  const ordered = ascending(latencies.map((each) => each.ms));
  return {
    [`${name} max ms`]: ordered.at(-1) ?? NaN,
    [`${name} p99 ms`]: percentile(ordered, 99),
    [`${name} p50 ms`]: percentile(ordered, 50),
  };
}

/** The server's resident memory now and at its peak (VmRSS, VmHWM in /proc/<pid>/status), MB. */
function memoryOf(pid: number): Figures {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n');
  const mb = (field: string) =>
    Math.round(Number(status.find((line) => line.startsWith(`${field}:`))?.split(/\s+/)[1] ?? NaN) / 1024);
  return { 'RSS MB': mb('VmRSS'), 'peak RSS MB': mb('VmHWM') };
}

/**
 * The part of that memory that is the main thread's V8 heap (committed, and in use at that moment) and the memory its objects
 * hold outside it (external, array buffers), from the server's /metrics: the rest of the RSS is the
 * code, the threads (the decision threads' isolates and Wasm memories, the checkpointer's) and
 * native allocations (SQLite's page cache, OpenSSL). Absent when /metrics does not answer.
 */
async function heapOf(side: CurveSide): Promise<Figures> {
  const metrics = await fetch(new URL('/metrics', side.job.url))
    .then((answer) => (answer.ok ? answer.text() : ''))
    .catch(() => '');
  const mb = (name: string) => {
    const line = metrics.split('\n').find((each) => each.startsWith(`${name} `));
    return line ? Math.round(Number(line.split(' ')[1]) / 1024 / 1024) : NaN;
  };
  const figures = {
    'heap MB': mb('arbiter_nodejs_heap_size_total_bytes'),
    'heap used MB': mb('arbiter_nodejs_heap_size_used_bytes'),
    'external MB': mb('arbiter_nodejs_external_memory_bytes'),
  };
  return Number.isNaN(figures['heap MB']) ? {} : figures;
}

interface FigureSummary {
  figure: string;
  small: number;
  large: number;
  /** The median of the per-round ratios large/small (null: a small side of 0). */
  ratio: number | null;
  roundRatios: (number | null)[];
  goal: string | null;
  met: boolean | null;
}

/**
 * Each figure over the rounds: the worst of them for a maximum or a memory reading, the sum of
 * failures, the median otherwise; the ratio is the median of the rounds' ratios.
 */
function summary({ dimension, rounds }: Measured): FigureSummary[] {
  return Object.keys(rounds.small[0] ?? {}).map((figure) => {
    // Every round of a dimension reports the same figures (its kind's, and its side's own).
    const over = (size: Size) => rounds[size].map((each) => each[figure] ?? 0);
    const combine = figure.includes('max') || figure.endsWith(' MB') ? highest : figure === 'non-2xx' ? sum : median;
    const small = combine(over('small'));
    const large = combine(over('large'));
    const smallRounds = over('small');
    const roundRatios = over('large').map((value, round) => {
      const small = smallRounds[round] ?? 0;
      return small > 0 ? value / small : null;
    });
    const known = roundRatios.filter((each) => each !== null);
    const ratio = known.length ? median(known) : null;
    const goal = dimension.goals.find((each) => each.figure === figure);
    return { figure, small, large, ratio, roundRatios, ...judged(goal, large, ratio) };
  });
}

function judged(goal: Goal | undefined, large: number, ratio: number | null): Pick<FigureSummary, 'goal' | 'met'> {
  if (!goal) return { goal: null, met: null };
  const unit = goal.of === 'ratio' ? 'x' : ` ${goal.figure.split(' ').at(-1)}`;
  const value = goal.of === 'ratio' ? ratio : large;
  const [text, met] =
    goal.atLeast !== undefined
      ? [`≥ ${goal.atLeast}`, value !== null && value >= goal.atLeast]
      : goal.atMost !== undefined
        ? [`≤ ${goal.atMost}`, value !== null && value <= goal.atMost]
        : [`< ${goal.below}`, value !== null && value < goal.below!];
  return { goal: `${text}${unit}`, met };
}

/** One Markdown table: a block of rows per dimension, its sides named in its first row. */
function table(measured: Measured[]): string {
  const lines = [
    '| dimension | figure | small | large | large/small (rounds) | goal |',
    '| --- | --- | ---: | ---: | --- | --- |',
  ];
  for (const each of measured)
    for (const [row, figure] of summary(each).entries()) {
      const ratio =
        figure.ratio === null
          ? '–'
          : `${figure.ratio.toFixed(2)}x (${figure.roundRatios.map((r) => r?.toFixed(2) ?? '–').join(' ')})`;
      const goal = figure.goal ? `${figure.goal}: ${figure.met ? 'met' : '**missed**'}` : '';
      const name = row === 0 ? `${each.dimension.name}: ${each.labels.small} → ${each.labels.large}` : '';
      lines.push(
        `| ${name} | ${figure.figure} | ${shown(figure.small)} | ${shown(figure.large)} | ${ratio} | ${goal} |`,
      );
    }
  return lines.join('\n');
}

const shown = (value: number) => (Number.isInteger(value) ? String(value) : value.toFixed(1));
const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
const highest = (values: number[]) => Math.max(...values);
const brief = (figures: Figures) =>
  Object.entries(figures)
    .map(([name, value]) => `${name} ${shown(value)}`)
    .join(', ');
const ascending = (values: number[]) => [...values].sort((a, b) => a - b);
const loadAverage = () =>
  os
    .loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
const progress = (line: string) => console.error(`  ${line}`);

function positive(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  return value;
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
