import { setTimeout as sleep } from 'node:timers/promises';

/** How a chore that scales with stored data is cut up: at most `maxPerStep` rows (or pages) a step, each meant to take about `stepBudgetMs`. */
export interface Pace {
  maxPerStep: number;
  stepBudgetMs: number;
}

/**
 * For work a store does on the event loop (SQLite): a step of a purge holds every request for
 * its length, so it is kept to a few milliseconds (about 16 µs an expired token: ~300 rows).
 */
export const EVENT_LOOP_PACE: Pace = { maxPerStep: 1000, stepBudgetMs: 5 };

/**
 * For a step that writes its rows one at a time (an update each, awaited: nothing else runs
 * between them): on SQLite about 0.1 ms a row, so 50 rows fit the budget, where a step grown to
 * EVENT_LOOP_PACE's 1,000 after fast moments holds every request about 100 ms (found 2026-11-29:
 * deleting a subject that owned 5,000 delegations held them 89 to 117 ms in a step of 1,000).
 */
export const ROW_BY_ROW_PACE: Pace = { maxPerStep: 50, stepBudgetMs: 5 };

/**
 * A step never shrinks below this many rows (or pages). Small on purpose: the pause after a step
 * is as long as the step, so small steps cost a purge little of its pace (the rows' own cost
 * dominates; on a machine at load 20+, 1M rows took ~17 minutes against ~12 with a floor of 250),
 * while a step of 16 rows on a loaded machine holds the requests for milliseconds where one of
 * 250 held them for up to half a second (bench/curve.ts, the purge dimension).
 */
const MIN_PER_STEP = 16;

/**
 * The first step's rows (or pages), whatever the pace allows: the cost of a row is not known
 * until a step has measured it, and it varies tenfold (an expired token ~16 µs; an artefact with
 * its owners' indexes ~70 µs, so a first step of 1,000 held every request 69 ms on a quiet
 * machine and 137 ms in CI, found 2026-11-29). Doubling from here reaches 1,000 in five steps.
 */
const FIRST_PER_STEP = 64;

/**
 * Runs `step(limit)` (which does at most `limit` rows and says how many it did) until a step does
 * fewer than its limit: nothing is left (with `untilNone`, until a step does none: for a step that
 * may do fewer than it found, rows another request took meanwhile). Returns the sum. The first
 * step is small (FIRST_PER_STEP), since a row's cost is not known yet. After a step
 * slower than the budget, the next one is sized from the rate just measured to fit the budget (not
 * merely halved: on a loaded machine a step can take 100 times its budget); after one faster than
 * half of it, the limit doubles back. Between two full steps the event loop gets at least as long
 * as the step took (a timer, so that pending I/O runs), so requests keep at least half the time
 * however much there is to delete, and a step never holds them beyond its budget for long.
 */
export async function inPacedSteps(
  step: (limit: number) => Promise<number>,
  pace: Pace,
  { untilNone = false }: { untilNone?: boolean } = {},
): Promise<number> {
  let limit = Math.min(pace.maxPerStep, FIRST_PER_STEP);
  let done = 0;
  for (;;) {
    const started = performance.now();
    const did = await step(limit);
    const took = performance.now() - started;
    done += did;
    if (untilNone ? did === 0 : did < limit) return done;
    const full = did >= limit;
    limit = nextLimit(limit, took, pace);
    // After a step that found fewer than its limit (untilNone's last look), a turn is enough.
    await (full ? sleep(Math.max(1, Math.ceil(took))) : new Promise((resolve) => setImmediate(resolve)));
  }
}

/** The limit of the step after one of `limit` rows that took `took` ms. */
function nextLimit(limit: number, took: number, pace: Pace): number {
  if (took > pace.stepBudgetMs) return Math.max(MIN_PER_STEP, Math.floor((limit * pace.stepBudgetMs) / took));
  if (took < pace.stepBudgetMs / 2) return Math.min(pace.maxPerStep, limit * 2);
  return limit;
}
