import { initialAccessTokenRecords, type InitialAccessTokenRecord } from '../../catalog/index.js';
import type { ArbiterContext } from '../state.js';
import { bearerToken, invalidToken } from '../../http/bearer.js';
import { storageDigest, type Store, type TenantCollection } from '../../store/index.js';

export interface PresentedToken {
  id: number;
  name: string | null;
}

const CONSUME_ATTEMPTS = 5;
const UNUSABLE = 'the initial access token is unknown, expired or used up';

/**
 * Initial access tokens (RFC 7591 §3): the Admin API issues them (single- or multi-use,
 * expiring, per tenant); a registration presents one as a Bearer token. Whether one is required
 * is the `register` policy's decision, which sees which one was presented.
 */
export class InitialAccessTokens {
  constructor(private readonly store: Store) {}

  /** The token the request presents, or null for none; one that is unknown, expired or used up is a 401. */
  async presented(ctx: ArbiterContext): Promise<PresentedToken | null> {
    const authorization = ctx.get('authorization');
    if (authorization === '') return null;
    const value = bearerToken(authorization);
    const record = value ? await this.tokens(ctx).findOne({ tokenDigest: storageDigest(value) }) : null;
    if (!record || !usable(record)) throw invalidToken(ctx, UNUSABLE);
    return { id: record.id, name: record.name ?? null };
  }

  /** Uses the token up by one registration, atomically; a token used up meanwhile is a 401. */
  async consume(ctx: ArbiterContext, token: PresentedToken): Promise<void> {
    const tokens = this.tokens(ctx);
    for (let attempt = 0; attempt < CONSUME_ATTEMPTS; attempt += 1) {
      const current = await tokens.get(token.id);
      if (!current || !usable(current)) break;
      if (await tokens.update(token.id, { used: current.used + 1 }, { used: current.used })) return;
    }
    throw invalidToken(ctx, UNUSABLE);
  }

  private tokens(ctx: ArbiterContext): TenantCollection<InitialAccessTokenRecord> {
    return initialAccessTokenRecords(this.store, ctx.state.tenant.name);
  }
}

function usable(record: InitialAccessTokenRecord): boolean {
  const expired = record.expiresAt !== undefined && Date.parse(record.expiresAt) <= Date.now();
  const usedUp = record.uses !== undefined && record.used >= record.uses;
  return !expired && !usedUp;
}
