export { providerConfiguration } from './configuration.js';
export type { ProviderContext } from './context.js';
export { loadProviderSecrets, type ProviderSecrets } from './keys.js';
export { TenantProviders } from './providers.js';
export { createTenantProvider } from './provider.js';
export { CLIENTS_COLLECTION, clientMetadata, type ClientRecord } from './clients.js';
export { oauthEdge, type OAuthEdgeDeps } from './edge.js';
export { tokenCallers, type TokenCaller, type TokenCallers } from './token-callers.js';
export { inputParties } from './parties.js';
