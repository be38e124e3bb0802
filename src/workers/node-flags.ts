/**
 * The Node.js options every Arbiter server process starts with: `npm start` (scripts/start.sh),
 * the image (Dockerfile's CMD), the worker processes of WORKERS > 1 (primary.ts) and the server
 * processes tests and benchmarks start (test/support/entry-point.ts). V8 reads them when the
 * process starts, so they cannot be set from the server's own code.
 *
 * `--max-semi-space-size=16`: the main thread's young generation (two semi-spaces) at most 32 MB
 * instead of the ~100 MB V8 sizes it to on a machine with several GB of memory. Measured under
 * client_credentials load (bench/curve.ts, docs/scaling.md): the young generation was ~107 MB of
 * every server's resident memory, against 32 MB with this option, for the same CPU per request.
 * It is not a cap: a smaller young generation only means more, shorter scavenges.
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

/** `execArgv` and each of SERVER_NODE_FLAGS that neither it nor `nodeOptions` (NODE_OPTIONS) sets: an operator's own value wins. */
export function withServerNodeFlags(execArgv: readonly string[], nodeOptions = ''): string[] {
  const given = new Set([...execArgv, ...nodeOptions.split(/\s+/)].map(optionName));
  return [...execArgv, ...SERVER_NODE_FLAGS.filter((flag) => !given.has(optionName(flag)))];
}

/** `--max_semi_space_size=8` and `--max-semi-space-size 8` name the same option as `--max-semi-space-size=16`. */
function optionName(argument: string): string {
  return argument.split('=')[0]!.replaceAll('_', '-');
}
