import { subjectRecords } from '../catalog/index.js';
import type { Store } from '../store/index.js';
import { EVENT_TYPES } from './streams.js';
import type { EventParty, SignalEvent, Transmitter } from './transmitter.js';

type Fields = Record<string, unknown>;

/**
 * An Admin API change that may concern receivers, as src/admin reports it once it is stored and
 * before it is answered (`tenant` is the store tenant).
 */
export type AdminChange =
  | { kind: 'record'; path: string; tenant: string; before: Fields; after: Fields | null }
  | { kind: 'revoke-tokens'; tenant: string; clientId: string }
  | { kind: 'revoke-tokens'; tenant: string; subject: Fields }
  | { kind: 'client-secret'; tenant: string; clientId: string };

/** The most subjects of one identity provider told of its being disabled (one event each). */
const SUBJECTS_PER_PROVIDER_EVENT = 10_000;

/**
 * The events of an Admin change, appended to the outbox of every stream that covers them before
 * the change is answered (see src/outbox: a crash after the change and before this leaves the
 * operator unanswered, and the change to repeat):
 * - CAEP session-revoked: a client or subject disabled or deleted, its tokens revoked, an
 *   identity provider disabled or deleted (for each of its subjects);
 * - CAEP credential-change: a client's secret rotated, or its key set (`jwks`, `jwksUri`) changed;
 * - RISC account-disabled / account-enabled: a client or subject disabled, enabled again.
 * Returns how many SETs were appended.
 */
export function adminChangeSignals(store: Store, transmitter: Transmitter): (change: AdminChange) => Promise<number> {
  return async (change) => {
    const events = await eventsOf(store, change);
    let appended = 0;
    for (const event of events) appended += await transmitter.emit(event);
    return appended;
  };
}

async function eventsOf(store: Store, change: AdminChange): Promise<SignalEvent[]> {
  const { tenant } = change;
  const at = { event_timestamp: Math.floor(Date.now() / 1000), initiating_entity: 'admin' };
  const event = (type: string, party: EventParty, data: Fields = at): SignalEvent => ({ tenant, type, party, data });
  const revoked = (party: EventParty) => event(EVENT_TYPES.sessionRevoked, party);
  switch (change.kind) {
    case 'client-secret':
      return [credentialChange(event, { kind: 'client', clientId: change.clientId }, 'client_secret', at)];
    case 'revoke-tokens':
      return 'clientId' in change
        ? [revoked({ kind: 'client', clientId: change.clientId })]
        : [revoked(user(change.subject))];
    case 'record':
      return recordEvents(store, change, event, at);
  }
}

async function recordEvents(
  store: Store,
  { path, tenant, before, after }: Extract<AdminChange, { kind: 'record' }>,
  event: (type: string, party: EventParty, data?: Fields) => SignalEvent,
  at: Fields,
): Promise<SignalEvent[]> {
  const disabled = after !== null && after.enabled === false && before.enabled !== false;
  const enabled = after !== null && after.enabled !== false && before.enabled === false;
  const accountEvents = (party: EventParty): SignalEvent[] => [
    ...(after === null || disabled ? [event(EVENT_TYPES.sessionRevoked, party)] : []),
    ...(disabled ? [event(EVENT_TYPES.accountDisabled, party, {})] : []),
    ...(enabled ? [event(EVENT_TYPES.accountEnabled, party, {})] : []),
  ];
  switch (path) {
    case 'clients': {
      const party: EventParty = { kind: 'client', clientId: String(before.clientId) };
      const keysChanged =
        after !== null &&
        (JSON.stringify(after.jwks ?? null) !== JSON.stringify(before.jwks ?? null) ||
          (after.jwksUri ?? null) !== (before.jwksUri ?? null));
      return [...accountEvents(party), ...(keysChanged ? [credentialChange(event, party, 'public_key_set', at)] : [])];
    }
    case 'subjects': {
      const renamed = after !== null && after.subjectId !== before.subjectId;
      return [
        ...accountEvents(user(before)),
        // The old subjectId's tokens are revoked with the rename (src/admin/token-revocation.ts).
        ...(renamed ? [event(EVENT_TYPES.sessionRevoked, user(before))] : []),
      ];
    }
    case 'identity-providers': {
      if (!(after === null || disabled)) return [];
      const subjects = await subjectRecords(store, tenant).find(
        { identityProviderId: before.id as number },
        { limit: SUBJECTS_PER_PROVIDER_EVENT },
      );
      return subjects.map((subject) => event(EVENT_TYPES.sessionRevoked, user(subject)));
    }
    default:
      return [];
  }
}

function credentialChange(
  event: (type: string, party: EventParty, data?: Fields) => SignalEvent,
  party: EventParty,
  credentialType: string,
  at: Fields,
): SignalEvent {
  return event(EVENT_TYPES.credentialChange, party, { ...at, credential_type: credentialType, change_type: 'update' });
}

function user(subject: Fields): EventParty {
  return {
    kind: 'user',
    sub: String(subject.subjectId),
    email: typeof subject.email === 'string' ? subject.email : null,
  };
}
