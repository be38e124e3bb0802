/**
 * private_key_jwt client assertions (RFC 7523), signed synchronously with node:crypto so that the
 * load generator can make a fresh one for every request (autocannon's setupRequest is synchronous):
 * ES256, a unique jti, aud = the issuer, valid for five minutes.
 */
import { createPrivateKey, randomUUID, sign, type KeyObject } from 'node:crypto';
import type { JWK } from 'jose';

export const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

export interface AssertionSpec {
  /** The private P-256 JWK (with kid). */
  privateJwk: JWK;
  clientId: string;
  audience: string;
  /** The form the assertion is appended to (grant_type, scope, …). */
  form: string;
}

/** A function making one urlencoded token request body with a new assertion per call. */
export function assertionBodies(spec: AssertionSpec): () => string {
  const key: KeyObject = createPrivateKey({ key: spec.privateJwk as import('node:crypto').JsonWebKey, format: 'jwk' });
  const header = Buffer.from(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid: spec.privateJwk.kid })).toString(
    'base64url',
  );
  const prefix = `${spec.form}&client_id=${encodeURIComponent(spec.clientId)}&client_assertion_type=${encodeURIComponent(JWT_BEARER)}&client_assertion=`;
  return () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = {
      iss: spec.clientId,
      sub: spec.clientId,
      aud: spec.audience,
      jti: randomUUID(),
      iat: now,
      exp: now + 300,
    };
    const input = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
    const signature = sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url');
    return `${prefix}${input}.${signature}`;
  };
}
