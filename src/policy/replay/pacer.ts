/**
 * Paces background work that runs on the event loop live requests need (a replay of recorded
 * decisions, shadow evaluation): between two steps of work it lets the loop run, and when other
 * work was waiting (live traffic) it also waits long enough that its own share of the loop stays
 * within `share`. On an idle server the work runs at full speed: a yield with nothing waiting
 * comes back at once.
 */
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';

/** A yield that came back later than this found other work waiting. */
const BUSY_AFTER_MS = 1;
/** The longest pause between two steps, so that a long step does not stall the work for seconds. */
const MAX_PAUSE_MS = 250;

export class Pacer {
  private resumedAt = performance.now();

  /** @param share at most this fraction of the event loop while live work waits (0 < share ≤ 1) */
  constructor(private readonly share: number) {}

  /** Call between steps of work: yields to the event loop, and pauses as long as the pace asks. */
  async step(): Promise<void> {
    const worked = performance.now() - this.resumedAt;
    const yielded = performance.now();
    await nextTurn();
    const away = performance.now() - yielded;
    if (away > BUSY_AFTER_MS && this.share < 1) {
      const owed = Math.min(MAX_PAUSE_MS, (worked * (1 - this.share)) / this.share - away);
      if (owed > 0) await sleep(owed);
    }
    this.resumedAt = performance.now();
  }
}
