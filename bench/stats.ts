/** The nearest-rank percentile of ascending `sorted` (NaN when empty). */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** Milliseconds since a `process.hrtime.bigint()` reading. */
export const elapsedMs = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;
