import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The nearest-rank percentile of ascending `sorted` (NaN when empty). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Milliseconds since a `process.hrtime.bigint()` reading. */
export const elapsedMs = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;

/** Where every bench writes its runs (ignored by git; bench/RESULTS.md keeps the figures worth keeping). */
const RESULTS_DIRECTORY = join(dirname(fileURLToPath(import.meta.url)), 'results');

/**
 * Writes one run to bench/results/<benchmark>-<start time>.json, headed by what every run records
 * (the benchmark, when it started, the machine with its load average at the end: figures from a
 * busy machine must be read as such); answers the file's path.
 */
export function writeResults(benchmark: string, startedAt: Date, figures: Record<string, unknown>): string {
  mkdirSync(RESULTS_DIRECTORY, { recursive: true });
  const file = join(RESULTS_DIRECTORY, `${benchmark}-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  const cpus = os.cpus();
  const machine = {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? null,
    totalMemoryBytes: os.totalmem(),
    platform: os.platform(),
    release: os.release(),
    arch: os.arch(),
    node: process.version,
    loadAverage: os.loadavg(),
  };
  const document = { benchmark, startedAt: startedAt.toISOString(), machine, ...figures };
  writeFileSync(file, `${JSON.stringify(document, null, 2)}\n`);
  return file;
}

/** The middle of `values` (the mean of the two middle ones for an even count). */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
