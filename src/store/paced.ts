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
 * A step never shrinks below this: on a loaded machine every step looks slow (the thread waits for
 * a core), and steps of a few rows, each followed by a pause, would make a large purge last hours.
 */
const MIN_PER_STEP = 250;

/**
 * Runs `step(limit)` (which does at most `limit` rows and says how many it did) until a step does
 * fewer than its limit: nothing is left. Returns the sum. The limit shrinks while steps take longer
 * than the budget and grows back while they take less; between two steps the event loop gets at
 * least as long as the step took (a timer, so that pending I/O runs), so requests keep at least half
 * the time however much there is to delete, and a step never holds them beyond its budget for long.
 */
export async function inPacedSteps(step: (limit: number) => Promise<number>, pace: Pace): Promise<number> {
  let limit = pace.maxPerStep;
  let done = 0;
  for (;;) {
    const started = performance.now();
    const did = await step(limit);
    const took = performance.now() - started;
    done += did;
    if (did < limit) return done;
    if (took > pace.stepBudgetMs) limit = Math.max(MIN_PER_STEP, Math.floor(limit / 2));
    else if (took < pace.stepBudgetMs / 2) limit = Math.min(pace.maxPerStep, limit * 2);
    await sleep(Math.max(1, Math.ceil(took)));
  }
}
