import type { ArbiterContext } from '../state.js';
import type { Config } from '../../config/index.js';
import { bearerToken, invalidToken } from '../../http/bearer.js';
import { HttpError, methodNotAllowed } from '../../http/errors.js';
import { readJsonBody } from '../../http/body.js';
import { createOutbound, outboundOptionsOf } from '../../http/outbound.js';
import type { PolicyEngine } from '../../policy/index.js';
import type { Sealer, Store } from '../../store/index.js';
import type { ClientRecord } from '../clients/records.js';
import { clientInputOf } from '../clients/input.js';
import { clientRepository } from '../clients/repository.js';
import { verifyClientSecret, type ClientSecretsOf } from '../clients/secrets.js';
import { routes } from '../routes.js';
import { decideRegistration } from './decision.js';
import { InitialAccessTokens, type PresentedToken } from './initial-access-tokens.js';
import { markAuthenticated, markUnauthenticated } from '../../audit/facts.js';
import { clientForToken, createClient, disabledRegistration, updateClient } from './record.js';
import { clientInformation } from './response.js';
import { revokeDeletedClient } from '../shared/owned-artefacts.js';
import { SoftwareStatements, type SoftwareStatement } from './statement.js';
import { validateMetadata, type ValidatedMetadata } from './validation.js';
import { requestIssuer } from '../../tenancy/index.js';
import { authMethodOffered, unofferedMtlsMember, type MtlsSettings } from '../mtls/index.js';

export interface RegistrationDeps {
  config: Pick<
    Config,
    | 'issuer'
    | 'maxBodyBytes'
    | 'softwareStatementVerify'
    | 'openRegistrationsPerAddress'
    | 'openRegistrationsWindowSeconds'
    | 'openRegistrationsMaxClients'
    | 'outboundAllowInsecureLoopback'
    | 'outboundTimeoutMs'
    | 'outboundMaxResponseBytes'
    | keyof MtlsSettings
  >;
  store: Store;
  sealer: Sealer;
  policy: PolicyEngine;
}

/** How long a tenant found at OPEN_REGISTRATIONS_MAX_CLIENTS is taken as full without counting again. */
const FULL_REMEMBERED_MS = 10_000;
const FULL_TENANTS_REMEMBERED = 1000;

const UUID_SOFTWARE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Dynamic client registration, answered by Arbiter itself (oidc-provider's registration
 * endpoint is never reached): POST /register (RFC 7591) and, at the registration client URI
 * /register/{client_id}, GET, PUT and DELETE (RFC 7592). Every registration and update is
 * validated (validation.ts), decided by the `register` policy point (decision.ts) and kept in
 * Arbiter's client collection (record.ts), where the Admin API and /token find it.
 */
export function registrationHandlers({ config, store, sealer, policy }: RegistrationDeps) {
  const statements = new SoftwareStatements(
    config.softwareStatementVerify,
    policy,
    createOutbound(outboundOptionsOf(config)),
  );

  const initialAccessTokens = new InitialAccessTokens(store);
  const offered = authMethodOffered(config);

  const register = async (
    ctx: ArbiterContext,
    body: Record<string, unknown>,
    existing?: ClientRecord,
    initialAccessToken: PresentedToken | null = null,
  ) => {
    assertTenant(ctx, body);
    // A statement presented now must name its software; one an earlier release stored is read as
    // it was, also when an update sends it back (RFC 7592 §2.2: every field the read answered).
    const sent = body.software_statement !== undefined && body.software_statement !== null;
    const presented = sent && body.software_statement !== existing?.softwareStatementJwt;
    const statement = await readStatement(
      statements,
      sent ? body.software_statement : existing ? existing.softwareStatementJwt : undefined,
      presented,
    );
    const metadata = withStatementSoftware(validateMetadata(body), statement?.read ?? null);
    if (!offered(metadata.token_endpoint_auth_method))
      throw new HttpError(
        400,
        'invalid_client_metadata',
        `token_endpoint_auth_method ${metadata.token_endpoint_auth_method} is not offered by this server (mutual TLS is off, or no TLS_CLIENT_CA_FILE for tls_client_auth)`,
        { field: 'token_endpoint_auth_method' },
      );
    const mtlsMember = unofferedMtlsMember(config, metadata);
    if (mtlsMember)
      throw new HttpError(
        400,
        'invalid_client_metadata',
        `${mtlsMember} needs mutual TLS, which is off on this server`,
        {
          field: mtlsMember,
        },
      );
    assertPublicSubjects(body);
    // An update is decided knowing the client as it stands (the default pack never widens it).
    const registrant = existing ? { client: clientInputOf(existing, 'bearer') } : { initialAccessToken };
    const grant = await decideRegistration(ctx, policy, body, metadata, statement?.read ?? null, registrant);
    return { metadata, grant, statement };
  };

  /**
   * OPEN_REGISTRATIONS_MAX_CLIENTS: registered clients never expire, and the per-address budget
   * alone lets many addresses fill the store (found 2026-11-30), so open registration stops once
   * the tenant holds that many registered clients; one with an initial access token goes on.
   */
  const fullUntil = new Map<string, number>();
  const assertRoomForOpenRegistration = async (ctx: ArbiterContext): Promise<void> => {
    const full = () =>
      new HttpError(
        403,
        'access_denied',
        'this server holds as many registered clients as open registration may make: register with an initial access token',
      );
    const tenant = ctx.state.tenant.name;
    // Full a moment ago: not counted again (a count reads up to the bound's records) for each attempt.
    if ((fullUntil.get(tenant) ?? 0) > Date.now()) throw full();
    const limit = config.openRegistrationsMaxClients;
    const held = await clientRepository(store, sealer)
      .collection(ctx.state.tenant.id)
      .count({ registrationType: 'dcr' }, undefined, limit);
    if (held < limit) return void fullUntil.delete(tenant);
    if (fullUntil.size >= FULL_TENANTS_REMEMBERED) fullUntil.clear();
    fullUntil.set(tenant, Date.now() + FULL_REMEMBERED_MS);
    throw full();
  };

  /** POST /register (RFC 7591). */
  const registerClient = async (ctx: ArbiterContext): Promise<void> => {
    if (ctx.method !== 'POST') throw methodNotAllowed(ctx, 'POST');
    const initialAccessToken = await initialAccessTokens.presented(ctx);
    // Open registration: a decision for a caller with no credential, audited as such.
    if (!initialAccessToken) markUnauthenticated(ctx.state);
    const body = await jsonObject(ctx, config.maxBodyBytes);
    const { metadata, grant, statement } = await register(ctx, body, undefined, initialAccessToken);
    // Counted once the policy allowed it (open registration is off by default): a refusal costs no count.
    if (!initialAccessToken) await assertRoomForOpenRegistration(ctx);
    if (initialAccessToken) await initialAccessTokens.consume(ctx, initialAccessToken);
    const { record, issued } = await createClient(store, sealer, ctx.state.tenant.id, metadata, grant, statement);
    if (ctx.state.audit) Object.assign(ctx.state.audit, { clientId: record.clientId });
    // A valid registration access token: this caller's refusals are audited in full.
    markAuthenticated(ctx.state);
    ctx.status = 201;
    ctx.body = clientInformation(requestIssuer(config.issuer, ctx.state.tenant), record, issued);
  };

  /** RFC 7592: /register/{client_id} with the registration access token. */
  const manageClient = async (ctx: ArbiterContext): Promise<void> => {
    const tenant = ctx.state.tenant.name;
    const segment = ctx.path.slice(routes.registration.length + 1);
    if (!['GET', 'PUT', 'DELETE'].includes(ctx.method)) throw methodNotAllowed(ctx, 'GET, PUT, DELETE');
    const clientId = decodeSegment(segment);
    const token = bearerToken(ctx.get('authorization'));
    const record =
      clientId !== undefined && token !== undefined ? await clientForToken(store, tenant, clientId, token) : null;
    if (!record) throw invalidToken(ctx, 'the registration access token is missing or not valid for this client');
    if (ctx.state.audit) Object.assign(ctx.state.audit, { clientId: record.clientId });
    // A valid registration access token: this caller's refusals are audited in full.
    markAuthenticated(ctx.state);

    // The answers carry the registration access token (and maybe a new secret): never cached (RFC 6749 §5.1).
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Pragma', 'no-cache');
    // RFC 7592 §2.2, §2.3: a client the operator disabled may read its registration, not change or delete it.
    if (ctx.method !== 'GET' && record.enabled === false) throw disabledRegistration();
    if (ctx.method === 'GET') {
      // RFC 7592 §3: the read answer carries registration_access_token. Only its digest is
      // stored, so the answer is the token the request presented: still valid, not rotated
      // (a lost answer to a read must not lock the client out; updates rotate it).
      ctx.body = clientInformation(requestIssuer(config.issuer, ctx.state.tenant), record, {
        registrationAccessToken: token,
      });
    } else if (ctx.method === 'DELETE') {
      await clientRepository(store, sealer).remove(record.tenantId, record);
      // RFC 7592 §2.3: the client's grants and tokens go with it (and its UMA delegations and tickets).
      await revokeDeletedClient(store, tenant, record.clientId);
      ctx.status = 204;
    } else {
      const body = await jsonObject(ctx, config.maxBodyBytes);
      if (body.client_id !== record.clientId)
        throw new HttpError(
          400,
          'invalid_client_metadata',
          'client_id must be the client_id of the registration client URI',
          { field: 'client_id' },
        );
      await assertCurrentSecret({ store, sealer, tenant }, record, body.client_secret);
      const { metadata, grant, statement } = await register(ctx, body, record);
      const updated = await updateClient(store, sealer, record, metadata, grant, statement);
      if (!updated) throw invalidToken(ctx, 'the registration access token was rotated by another update');
      ctx.body = clientInformation(requestIssuer(config.issuer, ctx.state.tenant), updated.record, updated.issued);
    }
  };

  return { registerClient, manageClient };
}

/**
 * RFC 7592 §2.2: an update may carry the client's secret, which must then be the current one; a
 * client never chooses its own (the server generates every secret it hands out). A different one
 * is refused rather than silently ignored, which would leave the client believing it changed it.
 */
async function assertCurrentSecret(secrets: ClientSecretsOf, record: ClientRecord, presented: unknown): Promise<void> {
  if (presented === undefined || presented === null) return;
  const stored = record.clientSecret;
  const current =
    typeof presented === 'string' &&
    typeof stored === 'string' &&
    (await verifyClientSecret(secrets, record.clientId, presented, stored));
  if (!current)
    throw new HttpError(
      400,
      'invalid_client_metadata',
      'client_secret must be the current secret of this client, or be left out: a client cannot choose its secret (RFC 7592 §2.2)',
      { field: 'client_secret' },
    );
}

/**
 * The largest registration request read (or MAX_BODY_BYTES when smaller): client metadata with an
 * inline `jwks` and a software statement fit in a few kilobytes, and the body is read and parsed
 * before anyone is authenticated or any policy is asked.
 */
export const REGISTRATION_MAX_BODY_BYTES = 64 * 1024;

async function jsonObject(ctx: ArbiterContext, maxBodyBytes: number): Promise<Record<string, unknown>> {
  const body = await readJsonBody(ctx, Math.min(maxBodyBytes, REGISTRATION_MAX_BODY_BYTES));
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpError(400, 'invalid_client_metadata', 'the registration request must be a JSON object');
  }
  const object = body as Record<string, unknown>;
  // The audit log reads the parameter names from ctx.state.body.
  ctx.state.body = object;
  return object;
}

async function readStatement(
  statements: SoftwareStatements,
  jwt: unknown,
  presented: boolean,
): Promise<{ jwt: string; read: SoftwareStatement } | null> {
  if (jwt === undefined || jwt === null) return null;
  const read = await statements.read(jwt, presented);
  return { jwt: jwt as string, read };
}

/**
 * RFC 7591 §2.3: a value the statement holds takes precedence over the request's (found
 * 2026-11-29: a request's software_id was stored over the signed one, and every later decision,
 * list and audit entry saw it). The statement's software_id is kept when it is a UUID (the
 * registration's own form); otherwise the registration has none. A verified statement's only.
 */
function withStatementSoftware(metadata: ValidatedMetadata, statement: SoftwareStatement | null): ValidatedMetadata {
  const claims = statement?.claims ?? {};
  // An unverified statement's claims are the caller's word, as the request's are: they only fill a gap.
  const wins = statement?.verified === true;
  const softwareId = typeof claims.software_id === 'string' ? claims.software_id : undefined;
  if (softwareId !== undefined && (wins || metadata.software_id === undefined))
    metadata.software_id = UUID_SOFTWARE_ID.test(softwareId)
      ? softwareId.toLowerCase()
      : wins
        ? undefined
        : metadata.software_id;
  const version = typeof claims.software_version === 'string' ? claims.software_version : undefined;
  if (version !== undefined && (wins || metadata.software_version === undefined))
    metadata.software_version = version.length <= 2048 ? version : wins ? undefined : metadata.software_version;
  return metadata;
}

/** A `tenant_id` member must name the request's tenant (X-Tenant-Id): registration never crosses tenants. */
function assertTenant(ctx: ArbiterContext, body: Record<string, unknown>): void {
  const named = body.tenant_id;
  if (named === undefined || named === null) return;
  const { id, name } = ctx.state.tenant;
  if (named !== (id ?? name))
    throw new HttpError(400, 'invalid_client_metadata', 'tenant_id must name the tenant of the request (X-Tenant-Id)', {
      field: 'tenant_id',
    });
}

/**
 * Arbiter's subjects are public (the spec: no pairwise identifiers); a request for pairwise
 * subjects is refused rather than silently registered with public ones.
 */
function assertPublicSubjects(metadata: Record<string, unknown>): void {
  if (metadata.subject_type !== undefined && metadata.subject_type !== null && metadata.subject_type !== 'public') {
    throw new HttpError(400, 'invalid_client_metadata', "subject_type must be 'public'", { field: 'subject_type' });
  }
}

function decodeSegment(segment: string): string | undefined {
  if (segment === '' || segment.includes('/')) return undefined;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
