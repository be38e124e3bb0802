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

/** A name that could not be resolved in time is not asked again for this long: it is answered at once. */
export const FAILED_LOOKUP_MEMORY_MS = 10_000;

/** A failure of a lookup that waited its whole time for a turn: the caller is told, no lookup was made. */
export class LookupBusyError extends Error {
  readonly code = 'EAI_AGAIN';
  constructor(hostname: string, waitedMs: number) {
    super(`no DNS lookup of ${hostname} could start within ${waitedMs} ms: ${MAX_LOOKUPS_AT_ONCE} were under way`);
    this.name = 'LookupBusyError';
  }
}

interface Waiting {
  start: () => void;
  timer: NodeJS.Timeout;
}

type Answer = { error: NodeJS.ErrnoException | null; addresses: LookupAddress[] };

/**
 * Runs at most MAX_LOOKUPS_AT_ONCE lookups at once (first come, first served); a lookup waits at
 * most `waitMs` for its turn (the request's own time), then fails without being made. Lookups of
 * one name and family at once share one answer; a name whose lookup failed for want of an answer
 * (EAI_AGAIN, a timeout: not a name that does not exist) is failed at once for FAILED_LOOKUP_MEMORY_MS.
 */
export class LookupLimiter {
  private running = 0;
  private readonly queue: Waiting[] = [];
  private readonly inFlight = new Map<string, ((answer: Answer) => void)[]>();
  private readonly failed = new Map<string, { until: number; error: NodeJS.ErrnoException }>();

  constructor(
    private readonly lookup: LookupAll = systemLookup as unknown as LookupAll,
    private readonly maxAtOnce = MAX_LOOKUPS_AT_ONCE,
  ) {}

  resolve(hostname: string, options: LookupOptions, waitMs: number): Promise<LookupAddress[]> {
    const key = `${hostname}\n${options.family ?? 0}\n${options.hints ?? 0}`;
    const remembered = this.failed.get(key);
    if (remembered && remembered.until > Date.now()) return Promise.reject(remembered.error);
    return new Promise((resolve, reject) => {
      const answered = ({ error, addresses }: Answer) => (error ? reject(error) : resolve(addresses));
      const sharing = this.inFlight.get(key);
      if (sharing) return void sharing.push(answered);
      this.inFlight.set(key, [answered]);
      this.whenFree(
        () => this.run(key, hostname, options),
        waitMs,
        () => this.settle(key, { error: new LookupBusyError(hostname, waitMs), addresses: [] }),
      );
    });
  }

  private run(key: string, hostname: string, options: LookupOptions): void {
    this.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      this.running -= 1;
      this.next();
      if (error && error.code !== 'ENOTFOUND' && error.code !== 'ENODATA') this.remember(key, error);
      this.settle(key, { error, addresses });
    });
  }

  private whenFree(start: () => void, waitMs: number, gaveUp: () => void): void {
    if (this.running < this.maxAtOnce) {
      this.running += 1;
      return start();
    }
    const waiting: Waiting = {
      start,
      timer: setTimeout(() => {
        const index = this.queue.indexOf(waiting);
        if (index >= 0) this.queue.splice(index, 1);
        gaveUp();
      }, waitMs),
    };
    this.queue.push(waiting);
  }

  private next(): void {
    const waiting = this.queue.shift();
    if (!waiting) return;
    clearTimeout(waiting.timer);
    this.running += 1;
    waiting.start();
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
