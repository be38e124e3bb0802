import { createHash, randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';

/** A DPoP key pair and proofs of it (RFC 9449 §4.2): a fresh `jti`, now as `iat`. */
export class DpopKey {
  private constructor(
    private readonly privateKey: CryptoKey,
    readonly jwk: JWK,
  ) {}

  static async generate(): Promise<DpopKey> {
    const pair = await generateKeyPair('ES256');
    return new DpopKey(pair.privateKey, await exportJWK(pair.publicKey));
  }

  /** A proof for `htm` at `htu`, with `ath` when it comes with an access token (§4.3), and a server's nonce (§8). */
  proof(
    htm: string,
    htu: string,
    { accessToken, nonce }: { accessToken?: string; nonce?: string } = {},
  ): Promise<string> {
    return new SignJWT({
      htm,
      htu,
      jti: randomUUID(),
      iat: Math.floor(Date.now() / 1000),
      ...(accessToken ? { ath: createHash('sha256').update(accessToken).digest('base64url') } : {}),
      ...(nonce ? { nonce } : {}),
    })
      .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: this.jwk })
      .sign(this.privateKey);
  }
}
