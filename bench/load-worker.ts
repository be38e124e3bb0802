/** The load generator's process (see load.ts): runs one autocannon job per message. */
import autocannon from 'autocannon';
import { assertionBodies } from './assertion.js';
import type { LoadJob, LoadResult, LoadRun } from './load.js';
import { percentile } from './stats.js';

process.on('message', (message: { id: number; job: LoadJob }) => {
  run(message.job).then(
    (result) => process.send!({ id: message.id, run: result }),
    (error: unknown) =>
      process.send!({ id: message.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});
process.on('disconnect', () => process.exit(0));

/** What was received in one phase (warm-up or window). */
class Phase {
  readonly latencies: number[] = [];
  readonly statuses = new Map<number, number>();
  errors = 0;

  response(status: number, latency: number): void {
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
    if (status >= 200 && status < 300) this.latencies.push(latency);
  }

  result(seconds: number, exhausted: boolean): LoadResult {
    const sorted = [...this.latencies].sort((a, b) => a - b);
    const requests = [...this.statuses.values()].reduce((sum, count) => sum + count, 0);
    const at = (p: number) => percentile(sorted, p);
    const round = (ms: number) => Math.round(ms * 100) / 100;
    return {
      requests,
      seconds,
      rps: requests / seconds,
      p50: round(at(50)),
      p90: round(at(90)),
      p99: round(at(99)),
      max: round(sorted.at(-1) ?? NaN),
      mean: round(sorted.reduce((sum, value) => sum + value, 0) / (sorted.length || 1)),
      errors: this.errors,
      non2xx: requests - sorted.length,
      statuses: Object.fromEntries(this.statuses),
      exhausted,
    };
  }
}

/** How long the window waits for every connection to have had a response (see load.ts) before it starts anyway. */
const CONNECT_WAIT_MS = 20_000;

async function run(job: LoadJob): Promise<LoadRun> {
  const requests = job.bodies
    ? [{ setupRequest: pooled(job.bodies, job.cycle === true, job.paths) }]
    : job.assertion
      ? [{ setupRequest: signed(assertionBodies(job.assertion)) }]
      : undefined;
  const responses: { at: number; status: number; latency: number }[] = [];
  const failures: number[] = [];
  const answered = new Set<unknown>();
  const started = performance.now();
  const warmupEnd = started + job.warmupSeconds * 1000;
  let allAnsweredAt = job.connections > 0 ? Number.POSITIVE_INFINITY : started;
  const windowStart = () => Math.max(warmupEnd, Math.min(allAnsweredAt, started + CONNECT_WAIT_MS));
  await new Promise<void>((resolve, reject) => {
    let stopped = false;
    const instance = autocannon(
      {
        url: job.url,
        method: job.method,
        headers: job.headers,
        body: job.body,
        requests,
        connections: job.connections,
        // The window's end stops the run (below); a pool bounds it too.
        ...(job.bodies && !job.cycle
          ? { amount: job.bodies.length - job.connections }
          : { duration: CONNECT_WAIT_MS / 1000 + job.warmupSeconds + job.seconds + 2 }),
      },
      (error) => {
        clearInterval(watch);
        if (error) reject(error);
        else resolve();
      },
    );
    const stopAt = (now: number) => {
      if (!stopped && now >= windowStart() + job.seconds * 1000) {
        stopped = true;
        instance.stop();
      }
    };
    const watch = setInterval(() => stopAt(performance.now()), 50);
    instance.on('response', (client: unknown, status: number, _bytes: number, latency: number) => {
      const now = performance.now();
      responses.push({ at: now, status, latency });
      if (!answered.has(client)) {
        answered.add(client);
        if (answered.size === job.connections) allAnsweredAt = now;
      }
      stopAt(now);
    });
    instance.on('reqError', () => failures.push(performance.now()));
  });
  const from = windowStart();
  const to = from + job.seconds * 1000;
  const warmup = new Phase();
  const measured = new Phase();
  // The response that completed the set of answered connections belongs to the warm-up.
  for (const { at, status, latency } of responses)
    (at <= from ? warmup : at <= to ? measured : undefined)?.response(status, latency);
  for (const at of failures) {
    const phase = at <= from ? warmup : at <= to ? measured : undefined;
    if (phase) phase.errors += 1;
  }
  const last = responses.at(-1)?.at ?? started;
  const exhausted = last < to - 50;
  return {
    warmup: warmup.result((from - started) / 1000, false),
    measured: measured.result(exhausted ? Math.max(0.001, (last - from) / 1000) : job.seconds, exhausted),
    connectedSeconds: allAnsweredAt === Number.POSITIVE_INFINITY ? null : (allAnsweredAt - started) / 1000,
    overallRps: responses.length / Math.max(0.001, (last - started) / 1000),
    responses: responses.length,
  };
}

/** Each request takes the next body of the pool (`cycle`: from the start again after the last), and its path when given. */
function pooled(bodies: string[], cycle: boolean, paths?: string[]) {
  let next = 0;
  return (request: autocannon.Request) => {
    const at = cycle ? next++ % bodies.length : Math.min(next++, bodies.length - 1);
    return { ...request, body: bodies[at], ...(paths ? { path: paths[at % paths.length] } : {}) };
  };
}

function signed(body: () => string) {
  return (request: autocannon.Request) => ({ ...request, body: body() });
}
