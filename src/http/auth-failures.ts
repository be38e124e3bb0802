import { hash } from 'node:crypto';
import type { Context, Next, ParameterizedContext } from 'koa';
import { HttpError } from './errors.js';
import { limitedAddress } from './forwarded.js';
import type { RequestState } from './state.js';

export interface AuthFailureLimits {
  /** Failed credentials one address may present per window (and one credential identity from one address). */
  limit: number;
  windowSeconds: number;
}

/**
 * How many times the per-address limit one credential identity may fail from all addresses
 * together before it is refused everywhere: enough that no single address (or a handful, such
 * as a victim's browser made to post forms) can lock a client or the Admin key out for
 * everyone, low enough that spreading guesses over many addresses gains little.
 */
export const IDENTITY_WIDE_FACTOR = 10;

/** Form and query parameters that carry a credential (RFC 6749 §2.3.1, RFC 7523 §2.2, RFC 6750 §2.2–2.3). */
const CREDENTIAL_PARAMETERS = ['client_secret', 'client_assertion', 'access_token'];

/** Where the request's CredentialAttempt waits for the code that verifies the credential. */
const ATTEMPT = 'credentialAttempt';

/**
 * Slows down credential guessing without letting anyone lock out a valid credential by failing
 * from its address (a shared NAT, a victim's browser made to load images or post forms).
 *
 * - Only a presented credential that fails counts: a 401 for a request with no credential at
 *   all (no Authorization, no X-Admin-API-Key, no client_secret/client_assertion/access_token;
 *   a CORS preflight never carries one) is not a guess and costs nothing.
 * - Per address: once an address has used up its failures for the window, what it presents is
 *   still verified: a valid credential succeeds; an invalid one is answered 429 (and counted).
 * - Per credential identity (a client of a tenant, the Admin key), named by the code that
 *   verifies it through `guardCredential` before it verifies: `limit` failures from one address,
 *   or IDENTITY_WIDE_FACTOR × `limit` from all addresses together, refuse that identity with 429
 *   without verifying, so that its secret cannot be guessed (a 200 for the right guess would
 *   otherwise tell the attacker they have it). The bundle token is only named (`nameCredential`).
 *
 * The counts are kept in `counters` (the store), shared by every node and worker on it.
 *
 * Mount outside the JSON error handler, so that it sees the status the caller got.
 */
export function authFailureLimit(limits: AuthFailureLimits, counters: FailureCounters) {
  const ledger = new FailureLedger(limits, counters);
  const verifications = new VerificationsUnderWay();
  return async function failureLimit(ctx: Context, next: Next): Promise<void> {
    const attempt = new CredentialAttempt(ledger, limitedAddress(ctx.ip), verifications);
    ctx.state[ATTEMPT] = attempt;
    try {
      await next();
    } finally {
      try {
        if (ctx.status === 401 && presentsCredential(ctx) && !attempt.verifiedRight) await attempt.failed(ctx);
      } finally {
        // Once its failure is counted, so that the next verification of the credential sees it.
        attempt.verificationOver();
      }
    }
  };
}

/**
 * Called by the code that verifies a credential, once it knows whose credential it is and before
 * it verifies it: refuses with 429 when that identity has failed too often (see authFailureLimit),
 * and remembers the identity, so that a failure counts against it. `identity` names the credential,
 * never holds it (a client id with its tenant, `admin-key`, `policy-bundle`).
 */
export async function guardCredential(ctx: Context, identity: string): Promise<void> {
  const attempt = ctx.state[ATTEMPT] as CredentialAttempt | undefined;
  if (!attempt) return;
  attempt.identity = identity;
  await attempt.waitForVerification(ctx);
}

/**
 * Like guardCredential, for a credential whose holder must never be refused: it is always
 * verified, and only a wrong one is answered 429 once its identity (or its address) failed too
 * often. For high-entropy secrets that infrastructure presents (the policy bundle token: a lockout
 * would cut OPA off from policy changes, and behind a proxy on the same host every caller shares
 * OPA's address).
 */
export function nameCredential(ctx: Context, identity: string): void {
  const attempt = ctx.state[ATTEMPT] as CredentialAttempt | undefined;
  if (attempt) attempt.identity = identity;
}

/**
 * Called by the code that verifies a credential, as soon as it found it right: the verification it
 * waited for (guardCredential) is over, so the next request of that credential may be verified,
 * and a 401 that follows is no guess and is not counted. A client's right secret refused for how it
 * was presented (another method than its registered one) is such a 401, so a client library that
 * retries with the other method (Go's x/oauth2 does) cannot lock its client out.
 */
export function credentialWasRight(ctx: Context): void {
  const attempt = ctx.state[ATTEMPT] as CredentialAttempt | undefined;
  if (!attempt) return;
  attempt.verifiedRight = true;
  attempt.verificationOver();
}

/** The identity of a client's credentials: client ids are per tenant. */
export function clientIdentity(tenant: string, clientId: string): string {
  return `client ${tenant} ${clientId}`;
}

/**
 * Where failures are counted: the store (Store.addToWindow and readWindows), so that every node and
 * every worker process on it counts together and N nodes do not give an attacker N times the tries.
 */
export interface FailureCounters {
  addToWindow(key: string, windowMs: number, amount?: number): Promise<WindowCount>;
  readWindows(keys: readonly string[]): Promise<Map<string, WindowCount>>;
}

/** A counter's count in its window and the window's end (epoch ms), as Store.addToWindow answers. */
interface WindowCount {
  count: number;
  resetAt: number;
}

/**
 * Three counters over one window: per address, per identity at an address, per identity everywhere.
 * A request with a credential costs one read (its identity's two counters) while nothing failed;
 * a failure costs one write per counter and no read (the counts come back with the writes).
 */
class FailureLedger {
  private readonly limit: number;
  private readonly windowMs: number;
  private readonly unfailed = new RecentlyUnfailed();

  constructor(
    { limit, windowSeconds }: AuthFailureLimits,
    private readonly counters: FailureCounters,
  ) {
    this.limit = limit;
    this.windowMs = windowSeconds * 1000;
  }

  /**
   * Whether the identity is refused at the address (the seconds it stays refused), else how many
   * more failures it may have before it is: as many of its verifications may be under way at once.
   */
  async identityStanding(identity: string, address: string): Promise<IdentityStanding> {
    const keys = this.keysOf(address, identity);
    const unlocked = { lockedFor: null, failuresLeft: this.limit };
    if (this.unfailed.recently(keys.identityAtAddress)) return unlocked;
    const counts = await this.unfailed.shared(keys.identityAtAddress, () =>
      this.counters.readWindows([keys.identityAtAddress, keys.identity]),
    );
    const here = counts.get(keys.identityAtAddress);
    const everywhere = counts.get(keys.identity);
    if (!here?.count && !everywhere?.count) {
      this.unfailed.remember(keys.identityAtAddress);
      return unlocked;
    }
    const lockedFor = this.lockedFor(here, everywhere, 0);
    if (lockedFor !== null) return { lockedFor, failuresLeft: 0 };
    const failuresLeft = Math.min(
      this.limit - (here?.count ?? 0),
      this.limit * IDENTITY_WIDE_FACTOR - (everywhere?.count ?? 0),
    );
    return { lockedFor: null, failuresLeft };
  }

  /**
   * Counts a failure of the address (and of the identity, when named); answers the seconds the
   * address or identity is refused for when it had already failed too often before this one, else
   * null. A store that cannot count does not turn the 401 into an error: the failure goes uncounted.
   */
  async countFailure(address: string, identity: string | null): Promise<number | null> {
    const keys = this.keysOf(address, identity ?? '');
    this.unfailed.forgetAll();
    const add = (key: string) => this.counters.addToWindow(key, this.windowMs);
    try {
      const [byAddress, ...byIdentity] = await Promise.all([
        add(keys.address),
        ...(identity === null ? [] : [add(keys.identityAtAddress), add(keys.identity)]),
      ]);
      // Each count includes this failure: what it was before decides.
      return lockedFor(byAddress, this.limit, 1) ?? this.lockedFor(byIdentity[0], byIdentity[1], 1);
    } catch {
      return null;
    }
  }

  private lockedFor(here: WindowCount | undefined, everywhere: WindowCount | undefined, counted: number) {
    return lockedFor(here, this.limit, counted) ?? lockedFor(everywhere, this.limit * IDENTITY_WIDE_FACTOR, counted);
  }

  private keysOf(address: string, identity: string) {
    const key = keyOf(identity);
    return {
      address: `auth-failures address ${address}`,
      identityAtAddress: `auth-failures identity ${key} at ${address}`,
      identity: `auth-failures identity ${key}`,
    };
  }
}

/**
 * The identities (at an address) whose counters this process read empty less than
 * UNFAILED_REUSE_MS ago: a client calling /token or /introspect many times a second costs one
 * store read a second, not one per request. Any failure this process counts forgets them all, so
 * failures seen here are read back at once; failures counted by another worker or node are seen
 * here within UNFAILED_REUSE_MS. That adds no more unverified-lock tries than requests already in
 * flight add (every one of them is past its check before the first failure is counted), and the
 * first failure here ends it.
 */
class RecentlyUnfailed {
  private readonly readAt = new Map<string, number>();
  /**
   * Reads under way: the requests that check while one is out join it (under load, every request
   * of the moment the last empty read lapsed read the counters again: 32 per node, once a second).
   */
  private readonly reading = new Map<string, Promise<Map<string, WindowCount>>>();

  shared(key: string, read: () => Promise<Map<string, WindowCount>>): Promise<Map<string, WindowCount>> {
    let counts = this.reading.get(key);
    if (!counts) {
      counts = read();
      this.reading.set(key, counts);
      const done = () => {
        if (this.reading.get(key) === counts) this.reading.delete(key);
      };
      counts.then(done, done);
    }
    return counts;
  }

  recently(key: string): boolean {
    const at = this.readAt.get(key);
    if (at === undefined) return false;
    if (Date.now() - at < UNFAILED_REUSE_MS) return true;
    this.readAt.delete(key);
    return false;
  }

  remember(key: string): void {
    // Bounded: many identities at once (a scan of client ids, many addresses) start it over.
    if (this.readAt.size >= UNFAILED_MAX_ENTRIES) this.readAt.clear();
    this.readAt.set(key, Date.now());
  }

  forgetAll(): void {
    this.readAt.clear();
    this.reading.clear();
  }
}

/** How long an empty read of an identity's failure counters stands in for the next ones. */
const UNFAILED_REUSE_MS = 1000;
const UNFAILED_MAX_ENTRIES = 10_000;

interface IdentityStanding {
  lockedFor: number | null;
  failuresLeft: number;
}

/**
 * The credentials of each identity being verified in this process now: at most as many as the
 * identity may still fail (found 2026-11-30: the counts were read before and written after the
 * verification, so every guess of a burst sent at once was verified: 40 at once against a limit of
 * 5 were 40 guesses). The others wait their turn, then read the counts again. A right credential
 * ends its verification as soon as it is found right (credentialWasRight), so a client's own burst
 * waits about one verification; a wrong one ends it once its failure is counted.
 */
class VerificationsUnderWay {
  private readonly byIdentity = new Map<string, { underWay: number; waiting: (() => void)[] }>();

  underWay(identity: string): number {
    return this.byIdentity.get(identity)?.underWay ?? 0;
  }

  begin(identity: string): void {
    this.entry(identity).underWay += 1;
  }

  end(identity: string): void {
    const entry = this.byIdentity.get(identity);
    if (!entry) return;
    entry.underWay -= 1;
    this.wakeNext(identity);
  }

  /**
   * Resolves true when a verification of the identity ends, false when none did within `waitMs`
   * (the waiter leaves the line, so no wake is spent on it); null when too many wait already.
   */
  turn(identity: string, waitMs: number, again: boolean): Promise<boolean> | null {
    const entry = this.entry(identity);
    if (!again && entry.waiting.length >= MAX_WAITING_VERIFICATIONS) return null;
    return new Promise((resolve) => {
      const woken = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        const index = entry.waiting.indexOf(woken);
        if (index >= 0) entry.waiting.splice(index, 1);
        resolve(false);
      }, waitMs);
      // Woken before and overtaken: first in the line again, not last.
      if (again) entry.waiting.unshift(woken);
      else entry.waiting.push(woken);
    });
  }

  /** The next waiting request reads the counts again (each in turn, however its turn ends). */
  wakeNext(identity: string): void {
    const entry = this.byIdentity.get(identity);
    if (!entry) return;
    entry.waiting.shift()?.();
    if (entry.underWay <= 0 && entry.waiting.length === 0) this.byIdentity.delete(identity);
  }

  private entry(identity: string) {
    let entry = this.byIdentity.get(identity);
    if (!entry) this.byIdentity.set(identity, (entry = { underWay: 0, waiting: [] }));
    return entry;
  }
}

/** Requests of one identity that may wait for a verification in one process; past it, 429 at once. */
const MAX_WAITING_VERIFICATIONS = 1000;
/** The longest a request waits for its turn: then 429 (a verification under way ends with its request, which is bounded too). */
const VERIFICATION_WAIT_MS = 10_000;

/** One request's credential: whose it is (once the verifying code said so) and what a failure of it costs. */
class CredentialAttempt {
  identity: string | null = null;
  /** The credential was verified right, and the request refused for another reason (credentialWasRight). */
  verifiedRight = false;
  /** The identity whose verification this request counts as under way, until it is over. */
  private verifying: string | null = null;

  constructor(
    private readonly ledger: FailureLedger,
    private readonly address: string,
    private readonly verifications: VerificationsUnderWay,
  ) {}

  /**
   * Returns when the identity's credential may be verified: it is not refused, and fewer of its
   * verifications are under way here than it may still fail. Throws 429 when it is refused.
   */
  async waitForVerification(ctx: Context): Promise<void> {
    const identity = this.identity!;
    // Asked again in the same request: its turn holds for the same identity, and ends for another.
    if (this.verifying === identity) return;
    this.verificationOver();
    let waited = false;
    try {
      for (;;) {
        const { lockedFor, failuresLeft } = await this.ledger.identityStanding(identity, this.address);
        if (lockedFor !== null)
          throw tooManyFailures(ctx, lockedFor, 'too many failed authentications with this credential');
        if (this.verifications.underWay(identity) < failuresLeft) {
          this.verifications.begin(identity);
          this.verifying = identity;
          return;
        }
        const turn = this.verifications.turn(identity, VERIFICATION_WAIT_MS, waited);
        if (!turn || !(await turn))
          throw tooManyFailures(ctx, 1, 'too many authentications with this credential at once');
        waited = true;
      }
    } finally {
      // A woken request that did not begin passes its wake on.
      if (waited && this.verifying === null) this.verifications.wakeNext(identity);
    }
  }

  /** Its verification is over (found right, or its failure counted): the next may begin. */
  verificationOver(): void {
    if (this.verifying === null) return;
    this.verifications.end(this.verifying);
    this.verifying = null;
  }

  /** A presented credential was refused (401): counted; answered 429 when its address or identity had already failed too often. */
  async failed(ctx: Context): Promise<void> {
    const lockedFor = await this.ledger.countFailure(this.address, this.identity);
    if (lockedFor === null) return;
    const refusal = tooManyFailures(ctx, lockedFor, 'too many failed authentications from this address');
    ctx.status = refusal.status;
    ctx.body = { error: refusal.code, error_description: refusal.message };
  }
}

/** True when the request carries something that is verified as a credential (an empty header or parameter is none). */
function presentsCredential(ctx: ParameterizedContext<RequestState>): boolean {
  if (ctx.get('authorization') !== '' || ctx.get('x-admin-api-key') !== '') return true;
  const { body } = ctx.state;
  return CREDENTIAL_PARAMETERS.some((name) => hasValue(ctx.query[name]) || hasValue(body?.[name]));
}

function hasValue(value: unknown): boolean {
  return typeof value === 'string' ? value !== '' : Array.isArray(value) && value.length > 0;
}

/** Seconds until the window ends when the count, less the `counted` just added, has reached the limit; else null. */
function lockedFor(window: WindowCount | undefined, limit: number, counted: number): number | null {
  if (!window || window.count - counted < limit) return null;
  return Math.max(1, Math.ceil((window.resetAt - Date.now()) / 1000));
}

/** Identities are chosen by callers (any client id): a digest keeps each key short. */
function keyOf(identity: string): string {
  return hash('sha256', identity, 'base64url');
}

function tooManyFailures(ctx: Context, retryAfter: number, reason: string): HttpError {
  ctx.set('Retry-After', String(retryAfter));
  return new HttpError(429, 'too_many_requests', `${reason}; retry after ${retryAfter} seconds`);
}
