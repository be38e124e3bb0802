/**
 * Paces background work that runs on the event loop live requests need (a replay of recorded
 * decisions, shadow evaluation): between two steps of work it lets the loop run, and when live
 * work was waiting for the loop it also waits long enough that its own share of the loop stays
 * within `share`. Live work was waiting when requests are being answered (`busy`) and the yield
 * came back late: requests in flight that wait on something else (the store, OPA) leave the loop
 * free, and a late yield with no request in flight is the machine's other load, not ours. On an
 * idle or lightly loaded server the work runs at full speed.
 */
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';

/** A yield that came back later than this found other work waiting. */
const BUSY_AFTER_MS = 1;

/** The longest pause between two steps, so that a long step does not stall the work for seconds. */
const MAX_PAUSE_MS = 250;

export class Pacer {
  private resumedAt = performance.now();

  /**
   * @param share at most this fraction of the event loop while live work waits (0 < share ≤ 1)
   * @param busy whether live requests are being answered now
   */
  constructor(
    private readonly share: number,
    private readonly busy: () => boolean = () => true,
  ) {}

  /** Call between steps of work: yields to the event loop, and pauses as long as the pace asks. */
  async step(): Promise<void> {
    const worked = performance.now() - this.resumedAt;
    const yielded = performance.now();
    await nextTurn();
    const away = performance.now() - yielded;
    if (this.share < 1 && away > BUSY_AFTER_MS && this.busy()) {
      const owed = Math.min(MAX_PAUSE_MS, (worked * (1 - this.share)) / this.share - away);
      if (owed > 0) await sleep(owed);
    }
    this.resumedAt = performance.now();
  }
}
