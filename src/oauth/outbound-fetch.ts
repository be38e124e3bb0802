import { outboundOptionsOf, sharedOutbound } from '../http/outbound.js';
import type { ConfigurationSlice } from './context.js';

/**
 * Every URL oidc-provider fetches on a client's word (a client's jwks_uri, for private_key_jwt
 * and signed requests) goes through Arbiter's one guarded outbound client (src/http/outbound.ts).
 */
export const outboundFetch: ConfigurationSlice = ({ config }) => ({
  fetch: sharedOutbound(outboundOptionsOf(config)).fetch as never,
});
