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
export { createTenantProvider } from './provider.js';
export { CLIENTS_COLLECTION, clientMetadata, type ClientRecord } from './clients/records.js';
export { oauthEdge, type OAuthEdgeDeps } from './edge.js';
export { REPEATABLE_QUERY_PARAMETERS } from './shared/resources.js';
export type { ArbiterContext, ArbiterMiddleware, ArbiterState } from './state.js';
export {
  clientCallers,
  tokenCallers,
  type ClientCaller,
  type ClientCallers,
  type TokenCaller,
  type TokenCallers,
} from './shared/callers.js';
export { inputParties } from './shared/parties.js';
export {
  isClientLive,
  revokeClientArtefacts,
  revokeDeletedClient,
  revokeIdentityProviderArtefacts,
  revokeSubjectArtefacts,
} from './shared/owned-artefacts.js';
export {
  generateClientSecret,
  generatedSecretDigest,
  hashClientSecret,
  isKeptClientSecret,
} from './clients/secrets.js';
export { registrableRedirectUriProblem, webUriProblem } from './register/redirect-uri.js';
