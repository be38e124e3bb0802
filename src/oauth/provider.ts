import Provider from 'oidc-provider';
import { createOidcAdapter, insertArtefactOnce } from '../../adapters/oidc/index.js';
import { auditedAuthorizationErrors, withdrawableCredentials } from '../audit/index.js';
import { createClientDocuments } from './register/cimd/index.js';
import { clientLookup } from './clients/records.js';
import { clientArtefactOwners } from './shared/owned-artefacts.js';
import { compareHashedClientSecrets } from './clients/secrets.js';
import { providerConfiguration } from './configuration.js';
import { providerIssuer, type ProviderContext } from './context.js';
import { installGrants } from './token/grants/index.js';
import { outboundOptionsOf } from '../http/outbound.js';
import { DEFAULT_TENANT } from '../store/index.js';
import {
  assertionAudiencesAt,
  atomicReplayDetection,
  everyClientMayAskForEveryType,
  findJwtAccessTokensToo,
  givenTokenParametersOnly,
  noNonceInRefreshedIdTokens,
  refetchClientKeysOnUnfamiliarKid,
} from './internals.js';
import { jwtAccessTokenLookup } from './token/jwt-access-tokens.js';
import { reportBackchannelLogouts } from './end-session/backchannel.js';
import { atLogout } from './end-session/index.js';
import { fapi2Tenant } from './fapi/index.js';
import { authMethodOffered } from './mtls/index.js';

/** Builds one tenant's oidc-provider: configuration slices, the store adapter, and Arbiter's extensions. */
export function createTenantProvider(context: ProviderContext): Provider {
  const { store, sealer, tenant, policy, config, log, basePath } = context;
  const documents = createClientDocuments({ config, store, tenant, policy, log, sealer });
  const provider = new Provider(providerIssuer(context), {
    ...providerConfiguration(context),
    adapter: createOidcAdapter(
      store,
      tenant,
      {
        Client: clientLookup(store, tenant, documents, {
          fapi2Tenant: fapi2Tenant(config, tenant),
          authMethodOffered: authMethodOffered(config),
        }),
      },
      clientArtefactOwners(store, tenant),
      basePath,
    ),
  });
  provider.proxy = true;
  compareHashedClientSecrets(provider, { store, sealer, tenant });
  everyClientMayAskForEveryType(provider);
  findJwtAccessTokensToo(provider, jwtAccessTokenLookup(context));
  noNonceInRefreshedIdTokens(provider);
  // Every tenant named by X-Tenant-Id is served under the one shared issuer (basePath ''), so a
  // client assertion or DPoP proof made out to it is good in each of them: its jti is kept once
  // for them all. Found 2026-11-30: kept per tenant, one assertion was taken once in each.
  const replayScope = basePath === '' ? DEFAULT_TENANT : tenant;
  atomicReplayDetection(provider, (id, payload, expiresAt) =>
    insertArtefactOnce(store, replayScope, 'ReplayDetection', id, payload, expiresAt),
  );
  givenTokenParametersOnly(provider);
  assertionAudiencesAt(provider, assertionOrigins(config));
  refetchClientKeysOnUnfamiliarKid();
  // A request whose audit entry cannot be written deletes the credentials it stored (auditTrail).
  withdrawableCredentials(provider);
  auditedAuthorizationErrors(provider);
  reportBackchannelLogouts(provider, log, context.logoutRetries, basePath);
  atLogout(provider, { store, tenant }, context.userLoggedOut);
  installGrants(provider, { store, policy, tenant, outbound: outboundOptionsOf(config), mtls: config });
  return provider;
}

/**
 * Where a client assertion's audience may be: the issuer's origin, and the mTLS alias base's when
 * one is configured (the endpoints a certificate-bound client calls), never a Host a request names.
 */
function assertionOrigins(config: ProviderContext['config']): string[] {
  const origins = [new URL(config.issuer).origin];
  if (config.mtlsEndpointBaseUrl) origins.push(new URL(config.mtlsEndpointBaseUrl).origin);
  return origins;
}
