import { identityProviderRecords, type IdentityProviderRecord } from '../../catalog/index.js';
import { bearerMatches } from '../../http/bearer.js';
import type { Outbound } from '../../http/outbound.js';
import { RemoteDocuments } from '../../http/remote-documents.js';
import { RemoteKeySets } from '../../http/remote-jwks.js';
import type { Sealer, Store } from '../../store/index.js';
import type { JWTPayload, JWTVerifyOptions } from 'jose';

/** The most identity provider records of a tenant a push is matched against (operators make a handful). */
const MAX_IDENTITY_PROVIDERS = 500;
/** A transmitter's discovered configuration is read again after this long. */
const CONFIGURATION_TTL_MS = 5 * 60_000;
const CONFIGURATION_CACHE_MAX = 100;
/** After a failed read of a transmitter's configuration, its pushes are refused at once for this long. */
const CONFIGURATION_FAILURE_BACKOFF_MS = 10_000;

/** An identity provider record that names a transmitter: its issuer is set. */
export type TransmittingProvider = IdentityProviderRecord & { ssfIssuer: string };

/** Whose push it is: the provider whose push secret the bearer is, and whether that provider is enabled. */
export type PushAuthentication =
  | { kind: 'authenticated'; idp: TransmittingProvider }
  | { kind: 'disabled'; idp: TransmittingProvider }
  | { kind: 'unknown' };

/**
 * The tenant's identity provider whose transmitter pushes with this `Authorization` header: the
 * header's bearer compared with each provider's sealed push secret, digests compared in constant
 * time (bearerMatches). A provider without a transmitter or a push secret authenticates no push.
 */
export async function pushingProvider(
  store: Store,
  sealer: Sealer,
  tenant: string,
  authorization: string,
): Promise<PushAuthentication> {
  if (authorization === '') return { kind: 'unknown' };
  const records = await identityProviderRecords(store, tenant).find({}, { limit: MAX_IDENTITY_PROVIDERS });
  for (const record of records) {
    if (!record.ssfIssuer || !record.ssfPushSecret) continue;
    if (!bearerMatches(authorization, sealer.unseal(record.ssfPushSecret))) continue;
    const idp = record as TransmittingProvider;
    return { kind: record.enabled === false ? 'disabled' : 'authenticated', idp };
  }
  return { kind: 'unknown' };
}

/** The transmitter's configuration could not be read: its keys are unknown, the push cannot be verified now. */
export class TransmitterUnavailableError extends Error {
  constructor(readonly url: string) {
    super(`the Shared Signals configuration at ${url} could not be read`);
    this.name = 'TransmitterUnavailableError';
  }
}

/**
 * The keys a transmitter signs with: its record's `ssfJwksUri`, else the `jwks_uri` of its SSF
 * configuration (SSF 1.0 §7.2, `/.well-known/ssf-configuration` inserted into its issuer), both
 * fetched through the outbound guard only, cached and bounded (RemoteKeySets).
 */
export class TransmitterKeys {
  private readonly keySets: RemoteKeySets;
  private readonly configurations = new RemoteDocuments<string>({
    ttlMs: CONFIGURATION_TTL_MS,
    failureBackoffMs: CONFIGURATION_FAILURE_BACKOFF_MS,
    maxEntries: CONFIGURATION_CACHE_MAX,
  });

  constructor(private readonly outbound: () => Outbound) {
    this.keySets = new RemoteKeySets(outbound);
  }

  /** The verified payload; JwksUnavailableError or TransmitterUnavailableError when the keys cannot be had, else jose's error. */
  async verify(jwt: string, idp: TransmittingProvider, options: JWTVerifyOptions): Promise<JWTPayload> {
    return this.keySets.verify(jwt, await this.jwksUriOf(idp), options);
  }

  private async jwksUriOf(idp: TransmittingProvider): Promise<string> {
    if (idp.ssfJwksUri) return idp.ssfJwksUri;
    const url = ssfConfigurationUrl(idp.ssfIssuer);
    return this.configurations.get(
      url,
      async () => {
        const configuration = (await this.outbound().getJson(url)) as { issuer?: unknown; jwks_uri?: unknown };
        // SSF 1.0 §7.2.1: the configuration's issuer is the one it was asked for, or it is not this transmitter's.
        if (configuration?.issuer !== idp.ssfIssuer || typeof configuration.jwks_uri !== 'string')
          throw new TransmitterUnavailableError(url);
        return configuration.jwks_uri;
      },
      () => new TransmitterUnavailableError(url),
    );
  }
}

/** SSF 1.0 §7.2: `/.well-known/ssf-configuration` between the issuer's host and its path (as RFC 8414 does). */
export function ssfConfigurationUrl(issuer: string): string {
  const url = new URL(issuer);
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
  return `${url.origin}/.well-known/ssf-configuration${path}`;
}
