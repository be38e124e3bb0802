/**
 * Documents Arbiter fetches from other servers and reads again and again (an issuer's JWKS, an
 * upstream identity provider's discovery document): kept while fresh, one fetch at a time per
 * URL however many requests need it, and a failed fetch remembered for a while, so that requests
 * anyone may send (a logout token, a sign-in) are refused at once rather than each opening one
 * more outbound request to a server that is down.
 */
export interface RemoteDocumentsOptions {
  /** A document fetched this long ago is fetched again when next needed. */
  ttlMs: number;
  /** After a failed fetch, the URL is not fetched again for this long. */
  failureBackoffMs: number;
  /** URLs remembered at most (the least recently fetched is forgotten first). */
  maxEntries: number;
}

interface Fetched<T> {
  /** The document of the last fetch that succeeded, if any. */
  document?: T;
  fetchedAt: number;
  failedAt?: number;
}

export class RemoteDocuments<T> {
  private readonly fetched = new Map<string, Fetched<T>>();
  private readonly fetching = new Map<string, Promise<T>>();

  constructor(private readonly options: RemoteDocumentsOptions) {}

  /**
   * The document at `url`: the one kept while fresh (unless `refresh`), else `fetch`'s, shared by
   * every caller while it runs. When `fetch` fails it throws `unavailable(its error)`, and within
   * the backoff that follows, `unavailable()`.
   */
  get(url: string, fetch: () => Promise<T>, unavailable: (cause?: unknown) => Error, refresh = false): Promise<T> {
    const kept = this.fetched.get(url);
    if (kept?.document !== undefined && !refresh && Date.now() - kept.fetchedAt < this.options.ttlMs)
      return Promise.resolve(kept.document);
    if (this.backingOff(url)) return Promise.reject(unavailable());
    let pending = this.fetching.get(url);
    if (!pending) {
      pending = this.fetchOnce(url, fetch, unavailable).finally(() => this.fetching.delete(url));
      this.fetching.set(url, pending);
    }
    return pending;
  }

  /** When the document at `url` was last fetched (0 if never). */
  fetchedAt(url: string): number {
    return this.fetched.get(url)?.fetchedAt ?? 0;
  }

  /** Whether a fetch of `url` failed within the backoff. */
  backingOff(url: string): boolean {
    const failedAt = this.fetched.get(url)?.failedAt;
    return failedAt !== undefined && Date.now() - failedAt < this.options.failureBackoffMs;
  }

  private async fetchOnce(url: string, fetch: () => Promise<T>, unavailable: (cause?: unknown) => Error): Promise<T> {
    let document: T;
    try {
      document = await fetch();
    } catch (error) {
      // A document fetched before stays good until its time is up: only a fetch again failed.
      this.remember(url, { ...(this.fetched.get(url) ?? { fetchedAt: 0 }), failedAt: Date.now() });
      throw unavailable(error);
    }
    this.remember(url, { document, fetchedAt: Date.now() });
    return document;
  }

  private remember(url: string, entry: Fetched<T>): void {
    this.fetched.delete(url);
    if (this.fetched.size >= this.options.maxEntries) this.fetched.delete(this.fetched.keys().next().value as string);
    this.fetched.set(url, entry);
  }
}
