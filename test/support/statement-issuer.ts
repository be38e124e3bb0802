import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

/** A software statement issuer on loopback: an ES256 key whose public half its /jwks serves. */
export class StatementIssuer {
  private constructor(
    readonly url: string,
    private readonly key: PrivateKey,
    private readonly server: Server,
  ) {}

  static async start(): Promise<StatementIssuer> {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const jwks = JSON.stringify({
      keys: [{ ...(await exportJWK(publicKey)), kid: 'statement-key', alg: 'ES256', use: 'sig' }],
    });
    const server = createServer((request, response) => {
      response
        .writeHead(request.url === '/jwks' ? 200 : 404, { 'content-type': 'application/json' })
        .end(request.url === '/jwks' ? jwks : '{}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new StatementIssuer(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, privateKey, server);
  }

  /** A statement signed with the issuer's key (iss and iat set; the claims may override them). */
  sign(claims: Record<string, unknown>): Promise<string> {
    return new SignJWT({ iss: this.url, iat: Math.floor(Date.now() / 1000), ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: 'statement-key' })
      .sign(this.key);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
