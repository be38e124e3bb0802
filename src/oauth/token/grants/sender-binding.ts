import { errors } from 'oidc-provider';
import type { DpopProof } from '../../internals.js';

/** What a presented token is bound to (RFC 9449 §6 `cnf.jkt`; RFC 8705 `cnf.x5t#S256`). */
export interface TokenBinding {
  /** The thumbprint of the DPoP key the token is bound to, or null. */
  jkt: string | null;
  /** Bound to a client certificate (mutual TLS), which a grant of Arbiter's cannot check. */
  certificateBound: boolean;
}

export function bindingOf(token: { jkt?: unknown; 'x5t#S256'?: unknown }): TokenBinding {
  return {
    jkt: typeof token.jkt === 'string' ? token.jkt : null,
    certificateBound: typeof token['x5t#S256'] === 'string',
  };
}

/**
 * RFC 9449 §1, §7: a sender-constrained token is never usable without its key, wherever it is
 * presented: as a token-exchange subject or actor token, as a UMA claim token or upgraded RPT.
 * The request must carry a DPoP proof (already verified) of the very key the token is bound to;
 * a token bound to a certificate cannot be proven here at all. Otherwise a bound token stolen
 * from its holder could be laundered into a Bearer token by any client.
 */
export function assertKeyHeld(binding: TokenBinding, proof: DpopProof | undefined, role: string): void {
  if (binding.certificateBound) {
    throw new errors.CustomOIDCProviderError(
      'invalid_grant',
      `the ${role} token is bound to a client certificate, which this grant cannot verify`,
    );
  }
  if (!binding.jkt) return;
  if (!proof)
    throw new errors.CustomOIDCProviderError(
      'invalid_grant',
      `the ${role} token is DPoP-bound: the request must carry a DPoP proof of its key`,
    );
  if (proof.thumbprint !== binding.jkt) {
    throw new errors.CustomOIDCProviderError(
      'invalid_grant',
      `the DPoP proof's key is not the key the ${role} token is bound to`,
    );
  }
}
