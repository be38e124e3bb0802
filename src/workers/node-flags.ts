import { setFlagsFromString } from 'node:v8';

/**
 * The Node.js options every Arbiter server process starts with: `npm start` (scripts/start.sh),
 * the image (Dockerfile's CMD), the worker processes of WORKERS > 1 (primary.ts) and the server
 * processes tests and benchmarks start (test/support/entry-point.ts). V8 reads them when the
 * process starts, so they cannot be set from the server's own code.
 *
 * `--max-semi-space-size=8`: the main thread's young generation (two semi-spaces) at most 16 MB
 * instead of the ~100 MB V8 sizes it to on a machine with several GB of memory. Measured under
 * client_credentials load (bench/curve.ts, docs/scaling.md): the young generation was ~107 MB of
 * every server's resident memory, against 32 MB with 16 and 16 MB with 8, for the same CPU per
 * request within the noise (paired runs, one tenant and 1,000). It is not a cap: a smaller young
 * generation only means more, shorter scavenges.
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=8'];

/** `execArgv` and each of SERVER_NODE_FLAGS that neither it nor `nodeOptions` (NODE_OPTIONS) sets: an operator's own value wins. */
export function withServerNodeFlags(execArgv: readonly string[], nodeOptions = ''): string[] {
  const given = new Set([...execArgv, ...nodeOptions.split(/\s+/)].map(optionName));
  return [...execArgv, ...SERVER_NODE_FLAGS.filter((flag) => !given.has(optionName(flag)))];
}

/** `--max_semi_space_size=8` and `--max-semi-space-size 8` name the same option as `--max-semi-space-size=8`. */
function optionName(argument: string): string {
  return argument.split('=')[0]!.replaceAll('_', '-');
}

/**
 * How far the old generation grows between full collections (HEAP_GROWTH_PERCENT): V8 lets it
 * grow to up to 4 times what the last full collection kept when it has several GB to use and
 * collects fast, so a process's resident memory follows its live heap times four. Measured with
 * 1,000 tenants under load (~170 MB live): 500 MB of heap and ~890 MB of RSS, against ~300 MB
 * and ~575 MB at 2 times (100), for the same CPU per request (30: +15% CPU). V8 reads the factor
 * at each full collection, so unlike the young generation it is set from here, for the whole
 * process (its threads included). Not a limit: the heap may still grow to V8's own maximum when
 * the live heap does; 0 leaves V8's heuristics alone.
 */
export function applyHeapGrowth(percent: number): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${percent}`);
}
