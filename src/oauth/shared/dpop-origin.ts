import { decodeJwt } from 'jose';
import { HttpError } from '../../http/errors.js';
import type { ArbiterContext } from '../state.js';

/**
 * RFC 9449 §4.3: a DPoP proof's `htu` is the URI the request was sent to, so that a proof made for
 * one server is refused by another. oidc-provider (and Arbiter's APIs, through its helper) compare
 * it with the URL the request names, built from its Host header, which the caller chooses: found
 * 2026-11-29, a proof made for `http://rs.evil.example/userinfo`, replayed here with
 * `Host: rs.evil.example`, was taken. So a proof must also be for one of this server's origins
 * (ISSUER's, and the mTLS alias base's); the path and the rest are checked where the proof is.
 * A proof that cannot be read is left to that check, which refuses it.
 */
export function proofsForOrigins(origins: readonly string[]) {
  const allowed = new Set(origins.map((origin) => new URL(origin).origin));
  return (ctx: ArbiterContext): void => {
    const proof = ctx.get('dpop');
    if (!proof) return;
    const htu = htuOf(proof);
    const origin = htu === undefined ? undefined : URL.parse(htu)?.origin;
    if (origin === undefined || allowed.has(origin)) return;
    // A protected resource answers a bad proof 401 (RFC 9449 §7.1); the token endpoint 400 (§5).
    const atResource = /^dpop\s/i.test(ctx.get('authorization'));
    if (atResource) ctx.set('WWW-Authenticate', 'DPoP error="invalid_dpop_proof"');
    throw new HttpError(
      atResource ? 401 : 400,
      'invalid_dpop_proof',
      'DPoP proof htu mismatch: it names another server',
    );
  };
}

function htuOf(proof: string): string | undefined {
  try {
    const { htu } = decodeJwt(proof);
    return typeof htu === 'string' ? htu : undefined;
  } catch {
    return undefined;
  }
}
