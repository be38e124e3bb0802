import type { X509Certificate } from 'node:crypto';
import type { KoaContextWithOIDC } from 'oidc-provider';
import type Provider from 'oidc-provider';
import { errors } from 'oidc-provider';
import { verifiedDpopProof, type DpopProof } from '../../internals.js';
import { certificateThumbprint, clientCertificatesOf, mtlsEnabled, type MtlsSettings } from '../../mtls/index.js';

/** What a presented token is bound to (RFC 9449 §6 `cnf.jkt`; RFC 8705 §3.1 `cnf.x5t#S256`). */
export interface TokenBinding {
  /** The thumbprint of the DPoP key the token is bound to, or null. */
  jkt: string | null;
  /** The thumbprint of the client certificate the token is bound to, or null. */
  x5t: string | null;
}

export function bindingOf(token: { jkt?: unknown; 'x5t#S256'?: unknown }): TokenBinding {
  return {
    jkt: typeof token.jkt === 'string' ? token.jkt : null,
    x5t: typeof token['x5t#S256'] === 'string' ? token['x5t#S256'] : null,
  };
}

/** Where a grant of Arbiter's own finds the request's client certificate (the provider's features.mTLS source). */
export interface SenderDeps {
  mtls: MtlsSettings;
}

/**
 * The keys a token request of Arbiter's own grants (token exchange, the UMA grant) shows it
 * holds: a verified DPoP proof (RFC 9449 §4.3) and the client certificate of its connection or
 * its trusted proxy (RFC 8705 §3), each read once.
 */
export interface HeldKeys {
  proof: DpopProof | undefined;
  certificate: X509Certificate | undefined;
}

export async function heldKeys(provider: Provider, ctx: KoaContextWithOIDC, deps: SenderDeps): Promise<HeldKeys> {
  const presented = mtlsEnabled(deps.mtls) ? clientCertificatesOf(deps.mtls).presented(ctx.req) : null;
  return { proof: await verifiedDpopProof(provider, ctx), certificate: presented?.certificate };
}

/**
 * RFC 9449 §1, §7 and RFC 8705 §3: a sender-constrained token is never usable without its key,
 * wherever it is presented: as a token-exchange subject or actor token, as a UMA claim token or
 * upgraded RPT. The request must carry a DPoP proof (already verified) of the very key the token
 * is bound to, or come with the very certificate. Otherwise a bound token stolen from its holder
 * could be laundered into a Bearer token by any client.
 */
export function assertKeyHeld(binding: TokenBinding, held: HeldKeys, role: string): void {
  if (binding.x5t) {
    if (!held.certificate)
      throw invalidGrant(`the ${role} token is bound to a client certificate the request did not present`);
    if (certificateThumbprint(held.certificate) !== binding.x5t)
      throw invalidGrant(`the client certificate is not the one the ${role} token is bound to`);
  }
  if (!binding.jkt) return;
  if (!held.proof)
    throw invalidGrant(`the ${role} token is DPoP-bound: the request must carry a DPoP proof of its key`);
  if (held.proof.thumbprint !== binding.jkt)
    throw invalidGrant(`the DPoP proof's key is not the key the ${role} token is bound to`);
}

/**
 * What the issued token is bound to, as oidc-provider's own grants bind theirs
 * (helpers/sender_constraints.js): the DPoP proof's key when the request carries one (RFC 9449
 * §5); the client certificate when the client is registered for certificate-bound tokens (RFC
 * 8705 §3, `tls_client_certificate_bound_access_tokens`, as FAPI 2.0 clients bound by certificate
 * are), which must then have come with the request; and a client registered for DPoP-bound
 * tokens (`dpop_bound_access_tokens`, FAPI 2.0's default) gets none without a proof. A token
 * made from a certificate-bound one is bound to that certificate too, unless a proof binds it.
 */
export function issuedBinding(
  ctx: KoaContextWithOIDC,
  held: HeldKeys,
  /** The bindings of the tokens it is made from (a token exchange's subject and actor). */
  madeFrom: readonly TokenBinding[] = [],
): IssuedBinding {
  const client = ctx.oidc.client!;
  if (client.dpopBoundAccessTokens && !held.proof) throw invalidGrant('DPoP proof JWT not provided');
  if (client.tlsClientCertificateBoundAccessTokens && !held.certificate)
    throw invalidGrant('mutual TLS client certificate not provided');
  // oidc-provider's own refusal of a token bound both ways, said here before the grant writes
  // anything (a Grant row, a redeemed permission ticket) rather than when the token is bound.
  if (client.tlsClientCertificateBoundAccessTokens && held.proof)
    throw new errors.InvalidRequest('multiple proof-of-possession mechanisms are not allowed');
  // A token made from a certificate-bound one (its certificate presented: assertKeyHeld) stays
  // bound to it unless a proof binds it to a key: never a Bearer token, whatever the client is
  // registered for (found 2026-11-30: a client no longer registered for bound tokens got one).
  const fromBound = madeFrom.some((binding) => binding.x5t !== null) && !held.proof;
  return {
    jkt: held.proof?.thumbprint ?? null,
    certificate: client.tlsClientCertificateBoundAccessTokens || fromBound ? (held.certificate ?? null) : null,
  };
}

/**
 * A decision's `obligations.dpop_required` (RFC 9449) refuses a request of Arbiter's own grants
 * that carries no proof, before the grant writes anything (the built-in grants: gate.ts).
 */
export function assertProofWhereObliged(
  decisions: readonly { obligations?: { dpop_required?: unknown } }[],
  held: HeldKeys,
): void {
  if (!held.proof && decisions.some((decision) => decision.obligations?.dpop_required === true))
    throw new errors.InvalidDpopProof('a DPoP proof is required for this client or resource');
}

/** The DPoP key thumbprint and the client certificate an issued token is bound to. */
export interface IssuedBinding {
  jkt: string | null;
  certificate: X509Certificate | null;
}

function invalidGrant(description: string): errors.CustomOIDCProviderError {
  return new errors.CustomOIDCProviderError('invalid_grant', description);
}
