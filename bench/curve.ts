/**
 * The cost curve: each dimension of scale (bench/curve-*.ts) small and large in one run, as two
 * Arbiter processes side by side (WORKERS=1, SQLite, seeded through the store code before they
 * start), measured in alternating rounds (small then large, then large then small, …) with the
 * same load. Prints, per dimension, each side's requests per second, p50 and p99, the large
 * side's ratio to the small one (the median of the per-round ratios) and each server's RSS
 * (the highest seen after a round, and its peak, VmHWM), with the machine's load (uptime).
 *
 *   npx tsx bench/curve.ts
 *   CURVE_DIMENSIONS=clients,tenants CURVE_ROUNDS=3 BENCH_SECONDS=10 npx tsx bench/curve.ts
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { clientsAndTenants } from './curve-clients-tenants.js';
import { LoadGenerator, type LoadJob, type LoadResult } from './load.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.CURVE_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

/** One side of a dimension: a running server and the load that measures it. */
export interface CurveSide {
  label: string;
  /** The server's process, whose memory is read. */
  pid: number;
  job: Omit<LoadJob, 'connections' | 'warmupSeconds' | 'seconds'>;
  close(): Promise<void>;
}

/** One dimension of scale: what the goal is, and how each side is started. */
export interface CurveDimension {
  name: string;
  /** The goal of large/small, e.g. 0.5. */
  goal: number;
  /** Warm-up of each measured run. */
  warmupSeconds: number;
  /** Send every pooled request once before the rounds (each tenant's providers built: the RSS is theirs). */
  prime?: boolean;
  start(size: 'small' | 'large'): Promise<CurveSide>;
}

/** Every dimension, by name (the other curve files add theirs here). */
const DIMENSIONS: CurveDimension[] = [...clientsAndTenants];

interface Measured {
  results: LoadResult[];
  rss: number[];
}

/** kB from /proc/<pid>/status (VmRSS, VmHWM), as MB. */
function memoryOf(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((each) => each.startsWith(`${field}:`));
  return Math.round(Number(line?.split(/\s+/)[1] ?? NaN) / 1024);
}

const median = (values: (number | null)[]) =>
  [...values].map((value) => value ?? NaN).sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

async function measure(dimension: CurveDimension, load: LoadGenerator): Promise<void> {
  const sides = [await dimension.start('small'), await dimension.start('large')];
  try {
    // A pass sends all but `connections` of the pool (load-worker.ts); a pool of one is warmed by the warm-up.
    if (dimension.prime)
      for (const side of sides)
        if ((side.job.bodies?.length ?? 0) > 4)
          await load.run({ ...side.job, cycle: false, connections: 4, warmupSeconds: 0, seconds: 600 });
    const measured: Measured[] = sides.map(() => ({ results: [], rss: [] }));
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? [0, 1] : [1, 0];
      for (const index of order) {
        const { measured: result } = await load.run({
          ...sides[index]!.job,
          connections: CONNECTIONS,
          warmupSeconds: dimension.warmupSeconds,
          seconds: SECONDS,
        });
        measured[index]!.results.push(result);
        measured[index]!.rss.push(memoryOf(sides[index]!.pid, 'VmRSS'));
      }
    }
    const ratios = measured[1]!.results.map((large, round) => large.rps / measured[0]!.results[round]!.rps);
    const ratio = median(ratios);
    for (const [index, side] of sides.entries()) {
      const { results, rss } = measured[index]!;
      console.log(
        `${dimension.name.padEnd(9)} ${side.label.padEnd(40)} ${median(results.map((r) => r.rps))
          .toFixed(0)
          .padStart(6)} req/s  p50 ${median(results.map((r) => r.p50)).toFixed(1)} ms  p99 ${median(
          results.map((r) => r.p99),
        ).toFixed(1)} ms  non-2xx ${results.reduce((sum, r) => sum + r.non2xx + r.errors, 0)}  RSS ${Math.max(
          ...rss,
        )} MB (peak ${memoryOf(side.pid, 'VmHWM')} MB)${results.some((r) => r.non2xx) ? ` statuses ${JSON.stringify(results.map((r) => r.statuses))}` : ''}`,
      );
    }
    console.log(
      `${dimension.name.padEnd(9)} large/small ${ratio.toFixed(2)}x (rounds ${ratios.map((r) => r.toFixed(2)).join(', ')}; goal ≥ ${dimension.goal}x)  load ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
  } finally {
    for (const side of sides) await side.close();
  }
}

async function main(): Promise<void> {
  const wanted = process.env.CURVE_DIMENSIONS?.split(',');
  const dimensions = DIMENSIONS.filter((dimension) => !wanted || wanted.includes(dimension.name));
  console.log(
    `cost curve: ${ROUNDS} alternating rounds of ${SECONDS} s, ${CONNECTIONS} connections, ${os.cpus().length} CPUs, load ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  const load = new LoadGenerator();
  try {
    for (const dimension of dimensions) await measure(dimension, load);
  } finally {
    load.close();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
