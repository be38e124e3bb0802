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
  return async (change) => transmitter.emit(change.tenant, await eventsOf(store, change));
}

/** A CAEP event's members: when, who, and why in words (`reason_admin`, which the CAEP Interoperability Profile requires). */
type Members = (reason: string, extra?: Fields) => Fields;

async function eventsOf(store: Store, change: AdminChange): Promise<SignalEvent[]> {
  const members: Members = (reason, extra = {}) => ({
    event_timestamp: Math.floor(Date.now() / 1000),
    initiating_entity: 'admin',
    reason_admin: { en: reason },
    ...extra,
  });
  const event = (type: string, party: EventParty, data: Fields): SignalEvent => ({ type, party, data });
  switch (change.kind) {
    case 'client-secret':
      return [
        event(
          EVENT_TYPES.credentialChange,
          { kind: 'client', clientId: change.clientId },
          members("the client's secret was rotated by an administrator", {
            credential_type: 'client_secret',
            change_type: 'update',
          }),
        ),
      ];
    case 'revoke-tokens':
      return [
        event(
          EVENT_TYPES.sessionRevoked,
          'clientId' in change ? { kind: 'client', clientId: change.clientId } : user(change.subject),
          members(`every token of the ${'clientId' in change ? 'client' : 'user'} was revoked by an administrator`),
        ),
      ];
    case 'record':
      return recordEvents(store, change, event, members);
  }
}

async function recordEvents(
  store: Store,
  { path, tenant, before, after }: Extract<AdminChange, { kind: 'record' }>,
  event: (type: string, party: EventParty, data: Fields) => SignalEvent,
  members: Members,
): Promise<SignalEvent[]> {
  const disabled = after !== null && after.enabled === false && before.enabled !== false;
  const enabled = after !== null && after.enabled !== false && before.enabled === false;
  const accountEvents = (party: EventParty, what: string): SignalEvent[] => [
    ...(after === null || disabled
      ? [
          event(
            EVENT_TYPES.sessionRevoked,
            party,
            members(`the ${what} was ${after === null ? 'deleted' : 'disabled'} by an administrator`),
          ),
        ]
      : []),
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
      const keys = members("the client's key set was changed by an administrator", {
        credential_type: 'public_key_set',
        change_type: 'update',
      });
      return [
        ...accountEvents(party, 'client'),
        ...(keysChanged ? [event(EVENT_TYPES.credentialChange, party, keys)] : []),
      ];
    }
    case 'subjects': {
      const renamed = after !== null && after.subjectId !== before.subjectId;
      const rename = members("the user's subject identifier was changed by an administrator");
      return [
        ...accountEvents(user(before), 'user'),
        // The old subjectId's tokens are revoked with the rename (src/admin/token-revocation.ts).
        ...(renamed ? [event(EVENT_TYPES.sessionRevoked, user(before), rename)] : []),
      ];
    }
    case 'identity-providers': {
      if (!(after === null || disabled)) return [];
      const subjects = await subjectRecords(store, tenant).find(
        { identityProviderId: before.id as number },
        { limit: SUBJECTS_PER_PROVIDER_EVENT },
      );
      const reason = members(
        `the user's identity provider was ${after === null ? 'deleted' : 'disabled'} by an administrator`,
      );
      return subjects.map((subject) => event(EVENT_TYPES.sessionRevoked, user(subject), reason));
    }
    default:
      return [];
  }
}

/** CAEP session-revoked for a user's own logout at /session/end (src/oauth/end-session). */
export function userLogout(sub: string): SignalEvent {
  return {
    type: EVENT_TYPES.sessionRevoked,
    party: { kind: 'user', sub },
    data: {
      event_timestamp: Math.floor(Date.now() / 1000),
      initiating_entity: 'user',
      reason_admin: { en: 'the user logged out' },
    },
  };
}

function user(subject: Fields): EventParty {
  return {
    kind: 'user',
    sub: String(subject.subjectId),
    email: typeof subject.email === 'string' ? subject.email : null,
  };
}
