export { providerConfiguration } from './configuration.js';
export type { ProviderContext } from './context.js';
export {
  loadProviderSecrets,
  resealProviderSecrets,
  rotateSigningKey,
  storedTenantKeys,
  watchSigningKeyRotations,
  type ProviderSecrets,
} from './keys.js';
export { TenantProviders } from './providers.js';
export {
  BACKCHANNEL_LOGOUT_TOPIC,
  deliverKeptLogout,
  tellClientsOfLogout,
  type LogoutNotices,
} from './end-session/backchannel.js';
export { createTenantProvider } from './provider.js';
export { CLIENTS_COLLECTION, type ClientRecord } from './clients/records.js';
export { clientMetadata } from './clients/metadata.js';
export { looksLikeDocumentUrl } from './register/cimd/url.js';
export { oauthSteps, protocolRequest, type OAuthEdgeDeps, type ProtocolFraming } from './edge.js';
export { REPEATABLE_PARAMETERS } from './shared/resources.js';
export {
  advertisedFeatures,
  asMatched,
  DISCOVERY_PATH,
  OAUTH_SERVER_METADATA_PATH,
  routes as oauthRoutes,
  UMA_CONFIGURATION_PATH,
} from './routes.js';
export { INTERACTION_PATH, UPSTREAM_CALLBACK_PATH, UPSTREAM_LOGOUT_PATH } from './interactions/index.js';
export type { ArbiterContext, ArbiterMiddleware, OAuthRequestState, OAuthState } from './state.js';
export {
  clientCallers,
  tokenCallers,
  type ClientCaller,
  type ClientCallers,
  type TokenCaller,
  type TokenCallers,
} from './shared/callers.js';
export { inputParties } from './shared/parties.js';
export { introspectionAsIssued, resourceOf } from './introspect/decide.js';
export {
  isClientLive,
  revokeClientArtefacts,
  revokeDeletedClient,
  revokeDeletedSubject,
  revokeIdentityProviderArtefacts,
  revokeSubjectArtefacts,
} from './shared/owned-artefacts.js';
export {
  generateClientSecret,
  generatedSecretDigest,
  hashClientSecret,
  isKeptClientSecret,
  MAX_SECRET_GRACE_SECONDS,
  rotateClientSecret,
} from './clients/secrets.js';
export { clientRepository, clientSecretHashing } from './clients/repository.js';
export {
  enabledIdentityProvider,
  identityProviderEnabled,
  newChecks,
  SignInError,
  UpstreamProviders,
  UpstreamSessions,
} from './interactions/index.js';
