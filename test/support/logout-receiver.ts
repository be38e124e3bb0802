import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One back-channel logout request as a relying party received it: its form and its content type. */
export interface ReceivedLogout {
  form: URLSearchParams;
  contentType: string;
}

/**
 * A relying party's back-channel logout endpoint (OIDC Back-Channel Logout 1.0 §2.5), on the
 * loopback interface: the requests posted to it, and how many posts to refuse (503) first.
 */
export class LogoutReceiver {
  readonly received: ReceivedLogout[] = [];
  refuseNext = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly server: Server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      if (this.refuseNext > 0) {
        this.refuseNext -= 1;
        response.writeHead(503).end();
        return;
      }
      this.received.push({ form: new URLSearchParams(body), contentType: request.headers['content-type'] ?? '' });
      response.writeHead(200, { 'Cache-Control': 'no-store' }).end();
      this.waiting.splice(0).forEach((wake) => wake());
    });
  });

  /** Listens; the URL to register as the client's backchannel_logout_uri. */
  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/backchannel_logout`;
  }

  /** The logout tokens posted so far. */
  get tokens(): string[] {
    return this.received.map((request) => request.form.get('logout_token') ?? '');
  }

  /** Waits until `count` requests arrived (the test's timeout bounds it); the logout tokens. */
  async tokensReceived(count: number): Promise<string[]> {
    while (this.received.length < count) await new Promise<void>((wake) => this.waiting.push(wake));
    return this.tokens.slice(0, count);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
