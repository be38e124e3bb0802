import { subjectRecords, type SubjectRecord } from '../../catalog/index.js';
import type { Logger } from '../../log/index.js';
import {
  revokeDeletedSubject,
  revokeSubjectArtefacts,
  tellClientsOfLogout,
  UpstreamSessions,
  type TenantProviders,
} from '../../oauth/index.js';
import type { Store } from '../../store/index.js';
import type { Tenant } from '../../tenancy/index.js';
import { isObject, type SecurityEvent } from './set.js';
import type { TransmittingProvider } from './transmitters.js';

const CAEP = 'https://schemas.openid.net/secevent/caep/event-type/';
const RISC = 'https://schemas.openid.net/secevent/risc/event-type/';
const SSF = 'https://schemas.openid.net/secevent/ssf/event-type/';

/**
 * The events after which the user holds nothing here: their grants, codes, tokens and sessions at
 * every client are revoked, and the clients of those sessions told (Back-Channel Logout), as an
 * upstream logout or an operator's revocation does. RISC `account-enabled` (and every other
 * event) is acknowledged and changes nothing: a disabled account is refused sign-in by the
 * provider itself, so Arbiter keeps no block of its own to lift.
 */
const REVOKING = new Set([
  `${CAEP}session-revoked`,
  `${RISC}account-disabled`,
  `${RISC}credential-compromise`,
  `${RISC}sessions-revoked`,
]);
/**
 * The events after which the user is gone for good (RISC 1.0 §2.2, §2.6): the account deleted, or
 * its identifier given to someone else. What they hold is revoked as above, and the delegations to
 * them or of them too, as when an operator deletes a subject: whoever signs in next under that
 * identifier is another person and inherits nothing.
 */
const ENDING = new Set([`${RISC}account-purged`, `${RISC}identifier-recycled`]);
/** Known events that change nothing here, the stream's own (SSF 1.0 §8.1.4: verification, stream-updated) among them. */
const ACKNOWLEDGED = new Set([
  `${RISC}account-enabled`,
  `${CAEP}credential-change`,
  `${CAEP}token-claims-change`,
  `${SSF}verification`,
  `${SSF}stream-updated`,
]);

/** What was done for one event: `revoked` (what its user held), `acknowledged` (nothing to do), `ignored` (unknown type or user). */
export type EventAction = 'revoked' | 'acknowledged' | 'ignored';

export interface EventOutcome {
  /** The event type's last segment for the known ones (session-revoked), `other` for the rest: a bounded label. */
  name: string;
  action: EventAction;
  /** The subjects (by subjectId) the event named here. */
  subjects: string[];
  /** How many artefacts were revoked. */
  revoked: number;
}

export interface ActingDeps {
  store: Store;
  providers: TenantProviders;
  log: Logger;
}

export async function actOn(
  deps: ActingDeps,
  tenant: Tenant,
  idp: TransmittingProvider,
  event: SecurityEvent,
): Promise<EventOutcome> {
  const ends = ENDING.has(event.type);
  const revokes = ends || REVOKING.has(event.type);
  const known = revokes || ACKNOWLEDGED.has(event.type);
  const name = known ? event.type.slice(event.type.lastIndexOf('/') + 1) : 'other';
  if (!revokes) return { name, action: known ? 'acknowledged' : 'ignored', subjects: [], revoked: 0 };
  const subjects = await subjectsNamed(deps.store, tenant.name, idp, event.subject);
  let revoked = 0;
  for (const subject of subjects) {
    const providerFor = (of: Tenant) => deps.providers.providerFor(of);
    const told = await tellClientsOfLogout(providerFor, deps.store, tenant.id, subject.subjectId, deps.log);
    revoked += await (ends ? revokeDeletedSubject : revokeSubjectArtefacts)(deps.store, tenant.name, subject.subjectId);
    deps.log.info({ tenant: tenant.name, idp: idp.idpId, event: name, revoked, ...told }, 'SSF event acted on');
  }
  return {
    name,
    action: subjects.length > 0 ? 'revoked' : 'ignored',
    subjects: subjects.map((subject) => subject.subjectId),
    revoked,
  };
}

/**
 * The provider's users a subject identifier (RFC 9493) names: `iss_sub` of the provider's
 * issuer (or its transmitter's) and `opaque` by the upstream `sub` Arbiter keeps as their
 * subjectId, `email` by the email their sign-in stored, `complex` by its `user` member, or by its
 * `session` member alone (CAEP's session-revoked about one upstream session): see sessionUser.
 * Another format, or a user who never signed in here, names nobody.
 */
async function subjectsNamed(
  store: Store,
  tenant: string,
  idp: TransmittingProvider,
  subject: unknown,
  nested = false,
): Promise<SubjectRecord[]> {
  if (!isObject(subject)) return [];
  const ofProvider = { identityProviderId: idp.id };
  const subjects = subjectRecords(store, tenant);
  switch (subject.format) {
    case 'iss_sub':
      if (subject.iss !== idp.issuer && subject.iss !== idp.ssfIssuer) return [];
      return typeof subject.sub === 'string' ? subjects.find({ ...ofProvider, subjectId: subject.sub }) : [];
    case 'opaque':
      return typeof subject.id === 'string' ? subjects.find({ ...ofProvider, subjectId: subject.id }) : [];
    case 'email':
      return typeof subject.email === 'string'
        ? subjects.find({ ...ofProvider, email: subject.email }, { limit: 10 })
        : [];
    case 'complex': {
      if (nested) return [];
      const signedIn = await sessionUser(store, tenant, idp, subject.session);
      if (subject.user !== undefined) return subjectsNamed(store, tenant, idp, subject.user, true);
      return signedIn === null ? [] : subjects.find({ ...ofProvider, subjectId: signedIn });
    }
    default:
      return [];
  }
}

/**
 * The user an upstream session (`{"format": "opaque", "id": <sid>}`, the `sid` of its ID tokens)
 * signed in here, remembered at each sign-in (UpstreamSessions, as back-channel logout by `sid`
 * uses), and forgotten now: that session is over. oidc-provider's sessions do not record which
 * upstream session made them, so what is revoked is what that user holds here, every session
 * (docs/signals.md). Null for another format or a session Arbiter never saw.
 */
async function sessionUser(
  store: Store,
  tenant: string,
  idp: TransmittingProvider,
  session: unknown,
): Promise<string | null> {
  if (!isObject(session) || session.format !== 'opaque' || typeof session.id !== 'string') return null;
  return new UpstreamSessions(store, tenant).end(idp.id, session.id);
}
