/**
 * Tokens carry times (`iat`, `exp`, `nbf`) that every node checks against its own clock: a node
 * whose clock runs ahead issues tokens from the future that live longer than their lifetime, one
 * behind accepts tokens that have expired everywhere else. Nothing else would notice, so each node
 * compares its clock with the shared store server's (Store.clock) at start and every
 * CLOCK_CHECK_INTERVAL_SECONDS: a skew beyond CLOCK_SKEW_LIMIT_SECONDS is logged, exported
 * (arbiter_clock_skew_seconds) and makes /readyz 503 until the clocks agree again. An embedded
 * store has no clock but the machine's: nothing to compare.
 */
import type { Logger } from '../log/index.js';
import type { Store } from './types.js';

export class ClockSkew {
  private skewMs: number | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly store: Pick<Store, 'clock'>,
    private readonly limitMs: number,
    private readonly log: Logger,
  ) {}

  /** Compares now and then every `intervalMs` (not waiting for the first comparison). */
  start(intervalMs: number): void {
    if (!this.store.clock) return;
    void this.check();
    this.timer = setInterval(() => void this.check(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** This node's clock minus the store's, in seconds (null: not measured, or no store clock). */
  get seconds(): number | null {
    return this.skewMs === null ? null : this.skewMs / 1000;
  }

  /** Why this node's clock cannot be trusted, or null while it agrees with the store's (or cannot be compared). */
  get problem(): string | null {
    if (this.skewMs === null || Math.abs(this.skewMs) <= this.limitMs) return null;
    const direction = this.skewMs > 0 ? 'ahead of' : 'behind';
    return `this node's clock is ${Math.round(Math.abs(this.skewMs) / 1000)} s ${direction} the store's (more than CLOCK_SKEW_LIMIT_SECONDS, ${this.limitMs / 1000} s): tokens it issues or checks would carry wrong times`;
  }

  /** One comparison: the store's time against the middle of the round trip that read it. */
  async check(): Promise<void> {
    const before = Date.now();
    let storeTime: number;
    try {
      storeTime = await this.store.clock!();
    } catch (error) {
      // The store's own faults are readiness's and the requests' to report; the last skew stands.
      this.log.debug({ err: error }, 'the store clock could not be read');
      return;
    }
    const wasProblem = this.problem;
    this.skewMs = (before + Date.now()) / 2 - storeTime;
    const problem = this.problem;
    if (problem && !wasProblem) this.log.error({ skewSeconds: this.seconds }, problem);
    else if (!problem && wasProblem)
      this.log.info({ skewSeconds: this.seconds }, "this node's clock agrees with the store's again");
  }
}
