import { decodeJwt, type JWTPayload } from 'jose';
import { identityProviderRecords, subjectRecords } from '../../catalog/index.js';
import { DependencyUnavailableError, HttpError } from '../../http/errors.js';
import { JWKS_FAILURE_BACKOFF_SECONDS, JwksUnavailableError } from '../../http/remote-jwks.js';
import { tellClientsOfLogout } from '../end-session/backchannel.js';
import { revokeSubjectArtefacts } from '../shared/owned-artefacts.js';
import type { ArbiterContext } from '../state.js';
import { SignInError } from './errors.js';
import { UpstreamSessions } from './upstream-sessions.js';
import type { Logger } from '../../log/index.js';
import type { Store } from '../../store/index.js';
import type { TenantProviders } from '../providers.js';
import {
  LOGOUT_TOKEN_CLOCK_TOLERANCE_SECONDS,
  LOGOUT_TOKEN_MAX_AGE_SECONDS,
  type UpstreamProviders,
} from './upstream.js';
import { insertArtefactOnce, takeArtefact } from '../../../adapters/oidc/index.js';
import type { AdapterPayload } from 'oidc-provider';

/**
 * Where an upstream identity provider posts its logout tokens (OIDC Back-Channel Logout 1.0):
 * register `{issuer}/idp/backchannel-logout` there as Arbiter's `backchannel_logout_uri` (for a
 * tenant signed in at /t/<tenant>, below its own issuer). A token naming the upstream session by
 * `sid` alone ends the sessions of the user that upstream session signed in.
 */
export const UPSTREAM_LOGOUT_PATH = '/idp/backchannel-logout';

interface UpstreamLogoutDeps {
  store: Store;
  providers: TenantProviders;
  log: Logger;
}

/**
 * A verified logout token from one of the tenant's enabled identity providers ends its user's
 * sessions here (the user its `sub` names, or whom its `sid`'s upstream session signed in): the
 * clients of those sessions are posted logout tokens of Arbiter's own (tellClientsOfLogout), then the user's grants, tokens and sessions are revoked, as an
 * operator's revocation does. 200 when done (also for a user Arbiter does not know); 400 with
 * `invalid_request` for a token that is not valid; 503 when the provider's keys cannot be read.
 */
export async function receiveUpstreamLogout(
  ctx: ArbiterContext,
  deps: UpstreamLogoutDeps,
  upstream: UpstreamProviders,
): Promise<void> {
  const token = ctx.state.body?.logout_token;
  if (typeof token !== 'string' || token === '') throw invalid('logout_token is required');
  const tenant = ctx.state.tenant;
  const idp = await issuingProvider(deps, tenant.name, token);
  const claims = await upstream.logoutClaims(idp, token).catch(asHttpError);
  const receipt = JSON.stringify(['upstream logout token', idp.id, claims.jti]);
  if (!(await firstReceipt(deps.store, tenant.name, receipt, claims)))
    throw invalid('a logout token with this jti was already received');
  try {
    await logOut(deps, tenant, idp, claims);
  } catch (error) {
    // Not acted on (the store failed meanwhile: a 503): the upstream's retry must not be refused as a repeat.
    await takeArtefact(deps.store, tenant.name, 'ReplayDetection', receipt).catch(() => undefined);
    throw error;
  }
  ctx.set('Cache-Control', 'no-store');
  ctx.status = 200;
  ctx.body = '';
}

/**
 * OIDC Back-Channel Logout 1.0 §2.6, step 7: a logout token is acted on once. Its `jti` is kept,
 * per provider, for as long as the token could be accepted, with one atomic insert (every node
 * on the store sees it): true for the first receipt only.
 */
function firstReceipt(store: Store, tenant: string, receipt: string, claims: JWTPayload): Promise<boolean> {
  const keptUntil = (claims.iat as number) + LOGOUT_TOKEN_MAX_AGE_SECONDS + 2 * LOGOUT_TOKEN_CLOCK_TOLERANCE_SECONDS;
  return insertArtefactOnce(
    store,
    tenant,
    'ReplayDetection',
    receipt,
    { kind: 'ReplayDetection', exp: keptUntil } as AdapterPayload,
    keptUntil * 1000,
  );
}

/** The user the token logs out: the clients of their sessions told (tellClientsOfLogout), then what they hold revoked. */
async function logOut(
  deps: UpstreamLogoutDeps,
  tenant: ArbiterContext['state']['tenant'],
  idp: { id: number; idpId: string },
  claims: JWTPayload,
): Promise<void> {
  const subjectId = await loggedOutSubject(deps, tenant.name, idp.id, claims);
  const subject = subjectId
    ? await subjectRecords(deps.store, tenant.name).findOne({ subjectId, identityProviderId: idp.id })
    : null;
  if (!subject) return;
  const providerFor = (of: typeof tenant) => deps.providers.providerFor(of);
  const told = await tellClientsOfLogout(providerFor, deps.store, tenant.id, subject.subjectId, deps.log);
  const revoked = await revokeSubjectArtefacts(deps.store, tenant.name, subject.subjectId);
  deps.log.info({ tenant: tenant.name, idp: idp.idpId, sub: subjectId, revoked, ...told }, 'upstream logout');
}

/**
 * Whom the token logs out (§2.4: `sub`, `sid`, or both): its `sub`, or the user its upstream
 * session `sid` signed in (UpstreamSessions; null when Arbiter saw no sign-in of that session).
 * That upstream session is forgotten either way: it is over.
 */
async function loggedOutSubject(
  deps: UpstreamLogoutDeps,
  tenant: string,
  identityProviderId: number,
  claims: JWTPayload,
): Promise<string | null> {
  const { sub, sid } = claims;
  if (typeof sub !== 'string' && typeof sid !== 'string') throw invalid('a logout token must carry sub, sid or both');
  const signedIn =
    typeof sid === 'string' ? await new UpstreamSessions(deps.store, tenant).end(identityProviderId, sid) : null;
  return typeof sub === 'string' ? sub : signedIn;
}

/** The tenant's enabled identity provider that issued the token, by its (unverified) `iss`; verified next. */
async function issuingProvider(deps: UpstreamLogoutDeps, tenant: string, token: string) {
  let issuer: unknown;
  try {
    issuer = decodeJwt(token).iss;
  } catch {
    throw invalid('logout_token is not a JWT');
  }
  const idp = typeof issuer === 'string' ? await identityProviderRecords(deps.store, tenant).findOne({ issuer }) : null;
  if (!idp || idp.enabled === false) throw invalid('the logout token is not from an enabled identity provider');
  return idp;
}

function asHttpError(error: unknown): never {
  if (error instanceof SignInError && error.error === 'invalid_request') throw invalid(error.description);
  // The keys cannot be had now: fetching them again backs off that long.
  if (error instanceof JwksUnavailableError)
    throw new DependencyUnavailableError(
      'identity provider',
      error.message,
      error.reason,
      JWKS_FAILURE_BACKOFF_SECONDS,
    );
  if (error instanceof SignInError) throw new DependencyUnavailableError('identity provider', error.message);
  throw error;
}

const invalid = (description: string) => new HttpError(400, 'invalid_request', description);
