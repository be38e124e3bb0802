import type { PolicyEngine } from '../../policy/index.js';

/** An external issuer policy data trusts (`data.oauth.trusted_issuers[<iss>]`). */
export interface TrustedIssuer {
  jwks_uri?: unknown;
  uses?: unknown;
  /**
   * For ID tokens of token exchange: the audiences (this server's clients' ids at that issuer)
   * accepted besides the client asking; an object of them to the clients here that may use each.
   */
  audiences?: unknown;
}

/** How a trusted issuer's JWTs may be signed: asymmetric only (its JWKS holds public keys; `none` and HMAC never pass). */
export const ISSUER_SIGNING_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
];

/** What an issuer is trusted for when its entry lists no `uses`. */
const DEFAULT_USES = ['token_exchange', 'software_statement'];

/**
 * The issuers `data.oauth.trusted_issuers` trusts for `use` (token-exchange ID tokens, software
 * statements), by issuer identifier: the one reading of that entry shared by protocol code.
 */
export async function trustedIssuersFor(
  policy: PolicyEngine,
  use: 'token_exchange' | 'software_statement',
): Promise<Map<string, TrustedIssuer>> {
  const issuers = ((await policy.policyData('oauth')) as { trusted_issuers?: unknown } | undefined)?.trusted_issuers;
  const trusted = new Map<string, TrustedIssuer>();
  if (!issuers || typeof issuers !== 'object') return trusted;
  for (const [issuer, entry] of Object.entries(issuers as Record<string, unknown>)) {
    if (!entry || typeof entry !== 'object') continue;
    const { uses } = entry as TrustedIssuer;
    if ((Array.isArray(uses) ? uses : DEFAULT_USES).includes(use)) trusted.set(issuer, entry as TrustedIssuer);
  }
  return trusted;
}
