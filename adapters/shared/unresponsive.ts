import { StoreUnavailableError } from '../../src/store/index.js';

/**
 * Once a call found the store's server unreachable or silent (a timeout, a broken connection), the
 * store's other calls would each wait out their own timeout, and a request making several would
 * take several timeouts (MongoDB: 10 to 15 s before a request's 503, found 2026-11-29). So until
 * one probe answers, calls fail at once with StoreUnavailableError: a request is answered 503
 * within about one timeout however many calls it makes. The probe runs at most one at a time,
 * when a call finds the store unresponsive. PostgreSQL's and MongoDB's store use it.
 */
export class Unresponsive {
  private since: number | null = null;
  private probing = false;

  constructor(
    /** Named in the error: "the PostgreSQL store has not answered …". */
    private readonly store: string,
    private readonly probe: () => Promise<unknown>,
  ) {}

  /** Throws while the store is known unresponsive (and starts a probe if none is under way). */
  check(): void {
    if (this.since === null) return;
    if (!this.probing) {
      this.probing = true;
      this.probe()
        .then(
          () => (this.since = null),
          () => undefined,
        )
        .finally(() => (this.probing = false));
    }
    throw new StoreUnavailableError(
      `the ${this.store} store has not answered since ${new Date(this.since).toISOString()}; nothing was done. Retry shortly.`,
    );
  }

  /** A call found the server unreachable or silent. */
  noticed(): void {
    this.since ??= Date.now();
  }
}
