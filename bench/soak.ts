/**
 * Memory under sustained load: Arbiter (in this process, SQLite store, managed OPA) answers
 * client_credentials with client_secret_basic at full load (64 connections from the bench's load
 * generator, a child process) for SOAK_SECONDS, in windows of 10 s; after each window the RSS and
 * heap of this process and the RSS of OPA are read. Prints them at start, middle and end with the
 * trend of the second half (least squares, MB per minute), and writes JSON to bench/results/.
 *
 *   npm run bench:soak                     5 minutes
 *   SOAK_SECONDS=60 npm run bench:soak     a quick look
 *
 * A benchmark, not a test: it reports and exits 0 whatever the figures (it fails only when
 * answers are wrong or requests fail).
 */
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { LoadGenerator } from './load.js';
import { scenarios } from './scenarios.js';
import { benchClients, startArbiter } from './servers.js';
import { writeResults } from './stats.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
const WINDOW_SECONDS = 10;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const SCENARIO = 'client_credentials, client_secret_basic';
const MB = 1024 * 1024;

interface Sample {
  atSeconds: number;
  rps: number;
  p99: number;
  failed: number;
  rssMb: number;
  heapUsedMb: number;
  opaRssMb: number;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  if (!(SECONDS >= WINDOW_SECONDS * 3)) throw new Error(`SOAK_SECONDS must be at least ${WINDOW_SECONDS * 3}`);
  const clients = await benchClients();
  const scenario = scenarios(clients).find((candidate) => candidate.name === SCENARIO)!;
  const load = new LoadGenerator();
  const arbiter = await startArbiter(clients);
  const samples: Sample[] = [];
  try {
    const spec = scenario.request(arbiter);
    const job = {
      url: `${arbiter.url}${spec.path}`,
      method: 'POST' as const,
      headers: spec.headers,
      body: spec.body,
      connections: CONNECTIONS,
    };
    const started = Date.now();
    samples.push({ atSeconds: 0, rps: 0, p99: 0, failed: 0, ...memory() });
    for (let window = 0; window < Math.floor(SECONDS / WINDOW_SECONDS); window++) {
      const { measured } = await load.run({ ...job, warmupSeconds: window === 0 ? 2 : 0, seconds: WINDOW_SECONDS });
      const failed = measured.errors + measured.non2xx;
      samples.push({
        atSeconds: Math.round((Date.now() - started) / 1000),
        rps: Math.round(measured.rps),
        p99: measured.p99,
        failed,
        ...memory(),
      });
      const last = samples.at(-1)!;
      console.log(
        `${String(last.atSeconds).padStart(4)} s  ${String(last.rps).padStart(5)} req/s  p99 ${String(last.p99).padStart(4)} ms  RSS ${last.rssMb.toFixed(0)} MB  heap ${last.heapUsedMb.toFixed(0)} MB  OPA ${last.opaRssMb.toFixed(0)} MB${failed ? `  ${failed} failed` : ''}`,
      );
    }
  } finally {
    load.close();
    await arbiter.close();
  }
  report(startedAt, samples);
}

function memory(): Pick<Sample, 'rssMb' | 'heapUsedMb' | 'opaRssMb'> {
  const usage = process.memoryUsage();
  return { rssMb: usage.rss / MB, heapUsedMb: usage.heapUsed / MB, opaRssMb: opaRssMb() };
}

/** The managed OPA's resident set (the newest `opa run` child of this process). */
function opaRssMb(): number {
  try {
    const pid = execFileSync('pgrep', ['-n', '-P', String(process.pid), '-f', 'opa'])
      .toString()
      .trim();
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

/** Least-squares slope of `values` over `seconds`, per minute. */
function slopePerMinute(seconds: number[], values: number[]): number {
  const n = seconds.length;
  const meanX = seconds.reduce((sum, x) => sum + x, 0) / n;
  const meanY = values.reduce((sum, y) => sum + y, 0) / n;
  const covariance = seconds.reduce((sum, x, i) => sum + (x - meanX) * (values[i]! - meanY), 0);
  const variance = seconds.reduce((sum, x) => sum + (x - meanX) ** 2, 0);
  return variance === 0 ? 0 : (covariance / variance) * 60;
}

function report(startedAt: Date, samples: Sample[]): void {
  const measured = samples.slice(1);
  const [start, middle, end] = [measured[0]!, measured[Math.floor(measured.length / 2)]!, measured.at(-1)!];
  const secondHalf = measured.slice(Math.floor(measured.length / 2));
  const trend = (pick: (sample: Sample) => number) =>
    slopePerMinute(
      secondHalf.map((sample) => sample.atSeconds),
      secondHalf.map(pick),
    );
  const summary = {
    scenario: SCENARIO,
    connections: CONNECTIONS,
    seconds: end.atSeconds,
    requests: measured.reduce((sum, sample) => sum + sample.rps * WINDOW_SECONDS, 0),
    failed: measured.reduce((sum, sample) => sum + sample.failed, 0),
    rssMb: {
      start: round(start.rssMb),
      middle: round(middle.rssMb),
      end: round(end.rssMb),
      secondHalfTrendPerMinute: round(trend((sample) => sample.rssMb)),
    },
    heapUsedMb: {
      start: round(start.heapUsedMb),
      middle: round(middle.heapUsedMb),
      end: round(end.heapUsedMb),
      secondHalfTrendPerMinute: round(trend((sample) => sample.heapUsedMb)),
    },
    opaRssMb: {
      start: round(start.opaRssMb),
      middle: round(middle.opaRssMb),
      end: round(end.opaRssMb),
      secondHalfTrendPerMinute: round(trend((sample) => sample.opaRssMb)),
    },
  };
  console.log(
    `\n${SCENARIO}, ${CONNECTIONS} connections, ${summary.seconds} s, ${summary.requests} requests, ${summary.failed} failed`,
  );
  console.log('                    start   middle     end   trend of the 2nd half');
  for (const [name, figures] of [
    ['Arbiter RSS', summary.rssMb],
    ['Arbiter heap used', summary.heapUsedMb],
    ['OPA RSS', summary.opaRssMb],
  ] as const) {
    console.log(
      `${name.padEnd(18)} ${fmt(figures.start)} ${fmt(figures.middle)} ${fmt(figures.end)}   ${figures.secondHalfTrendPerMinute >= 0 ? '+' : ''}${figures.secondHalfTrendPerMinute} MB/min`,
    );
  }
  const file = writeResults('soak', startedAt, { summary, samples });
  console.log(`\nwritten to ${file}`);
  if (summary.failed > 0) process.exitCode = 1;
}

const round = (value: number) => Math.round(value * 10) / 10;
const fmt = (value: number) => `${value.toFixed(0).padStart(5)} MB`;

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
