import { lookup as systemLookup, type LookupAddress, type LookupAllOptions, type LookupOptions } from 'node:dns';

/** The lookup the limiter runs (node:dns's `lookup` with `all: true`; a stand-in in unit tests). */
export type LookupAll = (
  hostname: string,
  options: LookupAllOptions,
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * Outbound DNS lookups at once in this process: `dns.lookup` runs getaddrinfo on one of libuv's
 * four pool threads, cannot be cancelled, and holds its thread for the resolver's whole timeout
 * (10 s with the usual resolv.conf) however soon the request gives up. The same threads verify
 * client secrets (bcrypt), compress and read files: found 2026-11-29, eight anonymous requests
 * naming hosts whose DNS never answers (client ID metadata documents) held all four, and a
 * lookup of `localhost` waited 40 s. At most this many run; the others wait their turn.
 */
export const MAX_LOOKUPS_AT_ONCE = 2;

/**
 * Whose word a name is on: a caller's (a client ID metadata document URL, which anyone may name)
 * or, for every other name, an operator's or a registered client's (an upstream IdP, a trusted
 * issuer, an SSF receiver, a client's jwks_uri).
 * Found 2026-11-30: one anonymous /authorize a second, each naming a fresh host whose DNS never
 * answers, kept both turns taken, and every upstream sign-in, JWKS fetch and SSF push of every
 * tenant failed after waiting its whole time. Callers' names may hold at most
 * CALLER_LOOKUPS_AT_ONCE of the turns, so an operator's name always has one; at most
 * CALLER_LOOKUPS_WAITING of them wait, and the next fails at once.
 */
export type LookupLane = 'operator' | 'caller';
export const CALLER_LOOKUPS_AT_ONCE = 1;
export const CALLER_LOOKUPS_WAITING = 16;

/** A name that could not be resolved in time is not asked again for this long: it is answered at once. */
export const FAILED_LOOKUP_MEMORY_MS = 10_000;

/** A failure of a lookup that waited its whole time for a turn: the caller is told, no lookup was made. */
export class LookupBusyError extends Error {
  readonly code = 'EAI_AGAIN';
  constructor(hostname: string, why: string) {
    super(`no DNS lookup of ${hostname} could start: ${why}`);
    this.name = 'LookupBusyError';
  }
}

interface Waiting {
  lane: LookupLane;
  start: () => void;
  timer: NodeJS.Timeout;
}

type Answer = { error: NodeJS.ErrnoException | null; addresses: LookupAddress[] };

/**
 * Runs at most MAX_LOOKUPS_AT_ONCE lookups at once (first come, first served, but callers' names
 * within their share: LookupLane); a lookup waits at
 * most `waitMs` for its turn (the request's own time), then fails without being made. Lookups of
 * one name and family at once share one answer; a name whose lookup failed for want of an answer
 * (EAI_AGAIN, a timeout: not a name that does not exist) is failed at once for FAILED_LOOKUP_MEMORY_MS.
 */
export class LookupLimiter {
  private running = 0;
  private runningForCallers = 0;
  private readonly queue: Waiting[] = [];
  private readonly inFlight = new Map<string, ((answer: Answer) => void)[]>();
  private readonly failed = new Map<string, { until: number; error: NodeJS.ErrnoException }>();

  constructor(
    private readonly lookup: LookupAll = systemLookup as unknown as LookupAll,
    private readonly maxAtOnce = MAX_LOOKUPS_AT_ONCE,
  ) {}

  resolve(
    hostname: string,
    options: LookupOptions,
    waitMs: number,
    lane: LookupLane = 'operator',
  ): Promise<LookupAddress[]> {
    const key = `${lane}\n${hostname}\n${options.family ?? 0}\n${options.hints ?? 0}`;
    const remembered = this.failed.get(key);
    if (remembered && remembered.until > Date.now()) return Promise.reject(remembered.error);
    return new Promise((resolve, reject) => {
      const answered = ({ error, addresses }: Answer) => (error ? reject(error) : resolve(addresses));
      const sharing = this.inFlight.get(key);
      if (sharing) return void sharing.push(answered);
      this.inFlight.set(key, [answered]);
      const busy = (why: string) => this.settle(key, { error: new LookupBusyError(hostname, why), addresses: [] });
      this.whenFree(lane, () => this.run(key, hostname, options, lane), waitMs, busy);
    });
  }

  private run(key: string, hostname: string, options: LookupOptions, lane: LookupLane): void {
    this.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      this.running -= 1;
      if (lane === 'caller') this.runningForCallers -= 1;
      this.next();
      if (error && error.code !== 'ENOTFOUND' && error.code !== 'ENODATA') this.remember(key, error);
      this.settle(key, { error, addresses });
    });
  }

  private whenFree(lane: LookupLane, start: () => void, waitMs: number, busy: (why: string) => void): void {
    if (this.mayStart(lane)) return this.begin(lane, start);
    if (lane === 'caller' && this.queue.filter((waiting) => waiting.lane === 'caller').length >= CALLER_LOOKUPS_WAITING)
      return busy(`${CALLER_LOOKUPS_WAITING} lookups of names callers gave were waiting already`);
    const waiting: Waiting = {
      lane,
      start,
      timer: setTimeout(() => {
        const index = this.queue.indexOf(waiting);
        if (index >= 0) this.queue.splice(index, 1);
        busy(`none of the ${this.maxAtOnce} under way ended within ${waitMs} ms`);
      }, waitMs),
    };
    this.queue.push(waiting);
  }

  private mayStart(lane: LookupLane): boolean {
    return this.running < this.maxAtOnce && (lane === 'operator' || this.runningForCallers < CALLER_LOOKUPS_AT_ONCE);
  }

  private begin(lane: LookupLane, start: () => void): void {
    this.running += 1;
    if (lane === 'caller') this.runningForCallers += 1;
    start();
  }

  /** The first waiting lookup that may start now (a caller's name waits while callers hold their share). */
  private next(): void {
    const index = this.queue.findIndex((waiting) => this.mayStart(waiting.lane));
    if (index < 0) return;
    const [waiting] = this.queue.splice(index, 1);
    clearTimeout(waiting!.timer);
    this.begin(waiting!.lane, waiting!.start);
  }

  private settle(key: string, answer: Answer): void {
    const callers = this.inFlight.get(key) ?? [];
    this.inFlight.delete(key);
    for (const answered of callers) answered(answer);
  }

  private remember(key: string, error: NodeJS.ErrnoException): void {
    if (this.failed.size >= 1000) this.failed.clear();
    this.failed.set(key, { until: Date.now() + FAILED_LOOKUP_MEMORY_MS, error });
  }
}
