import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet, jwtVerify, type JWTPayload, type JWTHeaderParameters } from 'jose';

/** A Security Event Token as a receiver accepted it: its signature verified against the transmitter's jwks_uri. */
export interface VerifiedSet {
  header: JWTHeaderParameters;
  payload: JWTPayload & { sub_id?: Record<string, string>; events: Record<string, Record<string, unknown>> };
  /** When it arrived (epoch ms), for latency figures. */
  receivedAt: number;
}

/**
 * Checks a SET as a receiver must (RFC 8417, SSF 1.0 §4): signed by a key of the transmitter's
 * jwks_uri (fetched with jose's createRemoteJWKSet), `typ` secevent+jwt, its issuer and audience.
 */
export class SetVerifier {
  private readonly keys: ReturnType<typeof createRemoteJWKSet>;
  constructor(
    jwksUri: string,
    private readonly issuer: string,
    private readonly audience: string,
  ) {
    this.keys = createRemoteJWKSet(new URL(jwksUri));
  }

  async verify(set: string): Promise<VerifiedSet> {
    const { payload, protectedHeader } = await jwtVerify(set, this.keys, {
      issuer: this.issuer,
      audience: this.audience,
      typ: 'secevent+jwt',
      algorithms: ['RS256'],
    });
    if (typeof payload.jti !== 'string' || typeof payload.iat !== 'number' || typeof payload.events !== 'object')
      throw new Error(`a SET lacks jti, iat or events: ${JSON.stringify(payload)}`);
    return { header: protectedHeader, payload: payload as VerifiedSet['payload'], receivedAt: Date.now() };
  }
}

/**
 * An RFC 8935 push receiver on the loopback interface: every SET posted is verified (a SET that
 * does not verify fails the wait below); `refuse` answers 503 while set, as a receiver that is down.
 */
export class PushReceiver {
  readonly received: VerifiedSet[] = [];
  readonly failures: string[] = [];
  readonly requests: { contentType: string; authorization: string | undefined }[] = [];
  refuse = false;
  verifier: SetVerifier | null = null;
  private readonly waiting: (() => void)[] = [];
  private readonly server: Server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      if (this.refuse) {
        response.writeHead(503).end();
        return;
      }
      this.requests.push({
        contentType: request.headers['content-type'] ?? '',
        authorization: request.headers.authorization,
      });
      if (!this.verifier) throw new Error('the push receiver has no verifier yet');
      this.verifier.verify(body).then(
        (verified) => {
          this.received.push(verified);
          response.writeHead(202).end();
          this.wake();
        },
        (error: Error) => {
          this.failures.push(error.message);
          response.writeHead(400, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ err: 'invalid_request', description: error.message }));
          this.wake();
        },
      );
    });
  });

  /** Listens; the URL to give as the stream's delivery.endpoint_url. */
  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/events`;
  }

  /** Waits until `count` SETs verified (the test's timeout bounds it); throws on a SET that did not. */
  async setsReceived(count: number): Promise<VerifiedSet[]> {
    while (this.received.length < count) {
      if (this.failures.length) throw new Error(`a SET did not verify: ${this.failures[0]}`);
      await new Promise<void>((wake) => this.waiting.push(wake));
    }
    return this.received.slice(0, count);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private wake(): void {
    this.waiting.splice(0).forEach((wake) => wake());
  }
}

/** The event of a SET (its one member of `events`): its type and members. */
export function eventOf(set: VerifiedSet): { type: string; data: Record<string, unknown> } {
  const [type, data] = Object.entries(set.payload.events)[0]!;
  return { type, data };
}

/**
 * An RFC 8936 poller: one poll of `endpoint` with the receiver's token, acknowledging `ack`; the
 * SETs answered, each verified (one that does not verify throws).
 */
export async function pollSets(
  endpoint: string,
  token: string,
  verifier: SetVerifier,
  request: { maxEvents?: number; returnImmediately?: boolean; ack?: string[] } = {},
): Promise<{ sets: Map<string, VerifiedSet>; moreAvailable: boolean; status: number }> {
  const response = await fetch(endpoint, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ returnImmediately: true, ...request }),
  });
  const body = (await response.json()) as { sets?: Record<string, string>; moreAvailable?: boolean };
  const sets = new Map<string, VerifiedSet>();
  for (const [jti, set] of Object.entries(body.sets ?? {})) {
    const verified = await verifier.verify(set);
    if (verified.payload.jti !== jti)
      throw new Error(`the poll answered ${jti} for a SET whose jti is ${verified.payload.jti}`);
    sets.set(jti, verified);
  }
  return { sets, moreAvailable: body.moreAvailable === true, status: response.status };
}
