import type { ConfigurationSlice } from '../context.js';

/**
 * RFC 9449 §8: in the tenants DPOP_NONCE_TENANTS names, a DPoP proof must carry a nonce the
 * server gave (oidc-provider answers `use_dpop_nonce` with a `DPoP-Nonce` header, at /token and
 * wherever Arbiter checks a proof: UserInfo, introspection's bound tokens, its own APIs), so a
 * proof made ahead of time by a stolen key is worthless. The nonce secret is the tenant's keyed
 * digest (src/store/sealed.ts), the same on every node, so a nonce given by one is taken by all.
 */
export const dpopNonces: ConfigurationSlice = ({ config, sealer, tenant }) =>
  requiresNonces(config.dpopNonceTenants, tenant)
    ? {
        features: {
          dPoP: {
            enabled: true,
            nonceSecret: Buffer.from(sealer.keyedDigest(`dpop-nonce ${tenant}`), 'base64url'),
            requireNonce: () => true,
          },
        },
      }
    : {};

function requiresNonces(listed: readonly string[], tenant: string): boolean {
  // The default tenant's store name is `_default`, as the list names it.
  return listed.includes('*') || listed.includes(tenant);
}
