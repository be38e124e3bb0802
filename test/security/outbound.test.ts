import { expect } from 'chai';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http';
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import ipaddr from 'ipaddr.js';
import { generateKeyPair, SignJWT } from 'jose';
import {
  assertFetchableUrl,
  createOutbound,
  OutboundLimitError,
  OutboundRefusedError,
  shownUrl,
} from '../../src/http/outbound.js';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  registerPublicClient,
  startRegisteredDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import { inTenant, readyServer, withServer, type TestServer } from '../support/server.js';

/**
 * SSRF: every URL an operator or client supplies is fetched through src/http/outbound.ts,
 * which refuses private, link-local, metadata and (in production) loopback destinations
 * before connecting. A tripwire in this process blocks, and records, any attempt to connect
 * outside loopback: these tests never send a packet off the machine, even against a
 * guard that fails, and a recorded attempt fails them.
 */
describe('Outbound requests: the SSRF guard', function () {
  let tripwire: Tripwire;
  let recorder: ConnectionRecorder;

  before(async () => {
    tripwire = new Tripwire();
    tripwire.install();
    recorder = await ConnectionRecorder.start();
  });

  after(async () => {
    tripwire?.uninstall();
    await recorder?.close();
  });

  /** it(), and then nothing may have tried to connect outside loopback (checked per test, so that one escape does not stop the rest). */
  function itStaysLocal(title: string, test: () => Promise<void> | void): void {
    it(title, async () => {
      tripwire.attempts.length = 0;
      await test();
      expect(tripwire.attempts, 'connections attempted outside loopback').to.deep.equal([]);
    });
  }

  /** Addresses refused even when insecure loopback is allowed (development). */
  const ALWAYS_REFUSED = [
    'http://10.255.255.1/',
    'https://10.0.0.1/',
    'https://172.16.0.1/',
    'https://192.168.1.1/',
    'https://100.64.0.1/',
    'https://169.254.169.254/latest/meta-data/',
    'http://169.254.169.254/',
    'https://0xa9fea9fe/',
    'https://2852039166/',
    'https://169.254.43518/',
    'https://[::ffff:169.254.169.254]/',
    'https://[fd00:ec2::254]/',
    'https://[fc00::1]/',
    'https://[fe80::1]/',
    'https://0.0.0.0/',
    'https://[::]/',
    'https://255.255.255.255/',
    'https://224.0.0.1/',
    'https://[ff02::1]/',
    'https://240.0.0.1/',
    'https://[64:ff9b::a9fe:a9fe]/',
    'https://[::127.0.0.1]/',
    'https://168.63.129.16/',
    'http://93.184.215.14/', // public, but plain http
  ];

  describe('the outbound module', () => {
    let target: TestHttpServer;
    const dev = () => createOutbound({ allowInsecureLoopback: true, timeoutMs: 1_000, maxResponseBytes: 1_000 });
    const production = () =>
      createOutbound({ allowInsecureLoopback: false, timeoutMs: 1_000, maxResponseBytes: 1_000 });

    before(async () => {
      target = await TestHttpServer.start((request, response, body) => {
        const path = request.url ?? '/';
        if (path === '/json')
          return void response.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":[]}');
        if (path === '/echo') return void response.end(JSON.stringify({ method: request.method, body }));
        if (path === '/to-metadata')
          return void response.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
        if (path === '/to-odd-metadata') return void response.writeHead(301, { location: 'https://0xa9fea9fe/' }).end();
        if (path === '/to-json') return void response.writeHead(302, { location: '/json' }).end();
        if (path.startsWith('/loop'))
          return void response.writeHead(302, { location: `/loop${Number(path.slice(5) || 0) + 1}` }).end();
        if (path === '/large') return void response.end('x'.repeat(1_001));
        if (path === '/large-chunked') {
          response.write('x'.repeat(800));
          return void setTimeout(() => response.end('x'.repeat(800)), 10);
        }
        if (path === '/gzip-bomb')
          return void response.writeHead(200, { 'content-encoding': 'gzip' }).end(gzipSync(Buffer.alloc(1_000_000)));
        if (path === '/hang') return; // never answers
        response.writeHead(404).end();
      });
    });

    after(() => target?.close());

    itStaysLocal('reaches a loopback http server when insecure loopback is allowed (GET, POST, JSON)', async () => {
      const outbound = dev();
      expect(await outbound.getJson(`${target.url}/json`)).to.deep.equal({ keys: [] });
      expect(await outbound.getJson(`http://localhost:${target.port}/json`)).to.deep.equal({ keys: [] });
      const posted = await outbound.fetch(`${target.url}/echo`, {
        method: 'POST',
        body: new URLSearchParams({ a: '1' }),
      });
      expect(posted).to.be.instanceOf(Response);
      expect(await posted.json()).to.deep.equal({ method: 'POST', body: 'a=1' });
    });

    itStaysLocal(
      'refuses private, link-local, metadata, reserved and odd spellings of them, even in development, before connecting',
      async () => {
        for (const outbound of [dev(), production()]) {
          for (const url of ALWAYS_REFUSED) await expectRefused(outbound.fetch(url), url);
        }
      },
    );

    itStaysLocal(
      'refuses loopback (by literal, IPv6, IPv4-mapped and by name) and plain http without insecure loopback',
      async () => {
        const outbound = production();
        const port = recorder.port;
        for (const url of [
          `https://127.0.0.1:${port}/`,
          `https://127.0.0.2:${port}/`,
          `https://127.1:${port}/`,
          `https://[::1]:${port}/`,
          `https://[::ffff:127.0.0.1]:${port}/`,
          `https://localhost:${port}/`,
          `${target.url}/json`,
        ]) {
          await expectRefused(outbound.fetch(url), url);
          await expectRefused(outbound.getJson(url), url);
        }
        expect(recorder.connections, 'connections to the loopback recorder').to.equal(0);
      },
    );

    itStaysLocal(
      'refuses odd spellings of loopback (hex, decimal, octal, short) without insecure loopback: they name 127.0.0.1',
      async () => {
        const port = recorder.port;
        const spellings = [
          '0x7f.1',
          '2130706433',
          '0177.0.0.1',
          '0x7f000001',
          '0x7f.0.0.1',
          '127.0.0.1.',
          '017700000001',
        ];
        for (const host of spellings) {
          expect(assertFetchableUrl(`http://${host}:${port}/`, true).hostname, host).to.equal('127.0.0.1');
          for (const url of [`https://${host}:${port}/`, `http://${host}:${port}/`]) {
            await expectRefused(production().fetch(url), url);
            expect(() => assertFetchableUrl(url, false), url).to.throw(OutboundRefusedError);
          }
        }
        expect(recorder.connections, 'connections to the loopback recorder').to.equal(0);
      },
    );

    itStaysLocal('refuses file:, ftp:, javascript:, data: and non-URLs', async () => {
      for (const url of [
        'file:///etc/passwd',
        `ftp://127.0.0.1:${recorder.port}/`,
        'javascript:alert(1)',
        'data:application/json,{}',
        'not a url',
      ]) {
        await expectRefused(dev().getJson(url), url);
        expect(() => assertFetchableUrl(url, true), url).to.throw(OutboundRefusedError);
      }
      expect(recorder.connections).to.equal(0);
    });

    itStaysLocal(
      'refuses a URL with credentials, and says so without quoting them (the reason is logged)',
      async () => {
        const url = `http://user:url-password@127.0.0.1:${target.port}/echo?token=url-token`;
        const refused = await dev()
          .fetch(url, { method: 'POST', body: 'set' })
          .then(
            () => null,
            (error: unknown) => error,
          );
        expect(refused).to.be.instanceOf(OutboundRefusedError);
        expect((refused as Error).message).to.match(/credentials/);
        expect((refused as Error).message).not.to.match(/url-password|url-token/);
        expect(() => assertFetchableUrl(url, true)).to.throw(OutboundRefusedError, /credentials/);
        expect(shownUrl(url)).to.equal(`http://127.0.0.1:${target.port}/echo`);
      },
    );

    itStaysLocal('assertFetchableUrl: scheme and IP literals, without DNS', () => {
      expect(assertFetchableUrl('https://idp.example.test/x', false).href).to.equal('https://idp.example.test/x');
      expect(assertFetchableUrl('http://127.0.0.1:9/x', true).hostname).to.equal('127.0.0.1');
      expect(() => assertFetchableUrl('http://127.0.0.1:9/x', false)).to.throw(OutboundRefusedError, /http: scheme/);
      expect(() => assertFetchableUrl('https://[::1]/', false)).to.throw(OutboundRefusedError, /loopback/);
      expect(() => assertFetchableUrl('http://8.8.8.8/', true)).to.throw(
        OutboundRefusedError,
        /plain http is allowed only to loopback/,
      );
      expect(() => assertFetchableUrl('https://0xa9fea9fe/', true)).to.throw(
        OutboundRefusedError,
        /169\.254\.169\.254 is a cloud metadata address/,
      );
    });

    itStaysLocal(
      're-checks every redirect: a loopback server redirecting to the metadata address is refused',
      async () => {
        const before = target.requests.length;
        await expectRefused(dev().getJson(`${target.url}/to-metadata`), '/to-metadata');
        await expectRefused(dev().fetch(`${target.url}/to-odd-metadata`), '/to-odd-metadata');
        expect(target.requests.length - before).to.equal(2);
        expect(await dev().getJson(`${target.url}/to-json`)).to.deep.equal({ keys: [] });
      },
    );

    itStaysLocal("redirect: 'manual' (openid-client's mode) returns the redirect without following it", async () => {
      const response = await dev().fetch(`${target.url}/to-metadata`, { redirect: 'manual' });
      expect(response.status).to.equal(302);
      expect(response.headers.get('location')).to.equal('http://169.254.169.254/latest/meta-data/');
    });

    itStaysLocal('follows at most 3 redirects', async () => {
      const before = target.requests.length;
      const error = await rejection(dev().getJson(`${target.url}/loop`));
      expect(error).to.be.instanceOf(OutboundLimitError);
      expect(target.requests.length - before).to.equal(4);
    });

    itStaysLocal('caps the response size: declared, streamed, and after decompression', async () => {
      for (const path of ['/large', '/large-chunked', '/gzip-bomb']) {
        const error = await rejection(dev().fetch(`${target.url}${path}`));
        expect(error, path).to.be.instanceOf(OutboundLimitError);
        expect((error as Error).message).to.match(/exceeds 1000 bytes/);
      }
    });

    itStaysLocal('times out a server that never answers', async () => {
      const outbound = createOutbound({ allowInsecureLoopback: true, timeoutMs: 300, maxResponseBytes: 1_000 });
      const started = Date.now();
      const error = await rejection(outbound.fetch(`${target.url}/hang`));
      expect(error).to.be.instanceOf(TypeError);
      expect(Date.now() - started).to.be.below(3_000);
    });

    itStaysLocal("honours the caller's signal, and a signal that fires after the response raises nothing", async () => {
      const aborted = await rejection(dev().fetch(`${target.url}/hang`, { signal: AbortSignal.timeout(100) }));
      expect((aborted as Error).name).to.equal('TimeoutError');
      // openid-client passes AbortSignal.timeout(...) with every request; it fires long after
      // the answer. An error raised then would be uncaught (and fail this test through mocha).
      // Fired by hand once the answer is read, as a timer would fire later: no race with a slow machine.
      const late = new AbortController();
      const response = await dev().fetch(`${target.url}/json`, { signal: late.signal });
      expect(await response.json()).to.deep.equal({ keys: [] });
      late.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
      // A turn of the event loop, for anything the abort would raise to surface.
      await new Promise((resolve) => setImmediate(resolve));
    });
  });

  describe('the Admin API', () => {
    let server: TestServer;

    before(async () => {
      // A tenant of its own on the shared server: it expects no identity provider but those it tried to register.
      server = inTenant(await withServer(), 'outbound-admin');
    });

    const NOT_HTTP = ['file:///etc/passwd', 'ftp://idp.example.test/', 'javascript:alert(1)'];

    itStaysLocal(
      'refuses non-http(s) issuer and endpoint URLs of identity providers with a 400 naming the field',
      async () => {
        for (const field of ['issuer', 'authorizationEndpoint', 'tokenEndpoint', 'userinfoEndpoint', 'jwksUri']) {
          for (const url of NOT_HTTP) {
            const { status, body } = await server.admin('POST', '/identity-providers', {
              issuer: 'https://idp.example.test',
              [field]: url,
            });
            expect(status, `${field} = ${url}`).to.equal(400);
            expect(body.field).to.equal(field);
            expect(body.error_description).to.contain(field);
          }
        }
        expect((await server.admin('GET', '/identity-providers')).body).to.deep.equal([]);
      },
    );

    itStaysLocal('refuses non-http(s) clientUri and logoUri of clients', async () => {
      for (const field of ['clientUri', 'logoUri']) {
        const { status, body } = await server.admin('POST', '/clients', {
          clientId: `c-${field}`,
          clientType: 'public',
          [field]: 'javascript:alert(1)',
        });
        expect(status).to.equal(400);
        expect(body.field).to.equal(field);
      }
    });
  });

  /** Registers an identity provider, starts a sign-in naming it, and returns where the browser is sent back. */
  async function signInThrough(
    server: TestServer,
    spa: TestClient,
    idp: Record<string, unknown>,
  ): Promise<{ page: URL; state: string }> {
    const created = await server.admin('POST', '/identity-providers', {
      name: 'SSRF probe',
      clientId: 'arbiter',
      clientSecret: IDP_SECRET,
      ...idp,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const request = await authorizationRequest(server, spa, { upstream_idp: created.body.idpId });
    const page = await new FetchUserAgent().navigate(request.url, arrivingAt(spa.redirectUri));
    return { page: page.url, state: request.state };
  }

  function expectUnavailable({ page, state }: { page: URL; state: string }, spa: TestClient): void {
    expect(page.href.startsWith(spa.redirectUri), page.href).to.equal(true);
    expect(page.searchParams.get('error')).to.equal('temporarily_unavailable');
    expect(page.searchParams.get('state')).to.equal(state);
  }

  describe('sign-in in production (NODE_ENV=production: no insecure loopback)', () => {
    let server: TestServer;
    let spa: TestClient;

    before(async () => {
      server = await readyServer({
        NODE_ENV: 'production',
        SERVICE_SECRETS_KEY: 'cHJvZHVjdGlvbi1saWtlLXNlYWxpbmcta2V5LWZvci0',
      });
      expect(server.config.outboundAllowInsecureLoopback).to.equal(false);
      spa = await registerPublicClient(server, 'http://127.0.0.1:1/production/callback');
    });

    after(() => server?.close());

    const issuers = () => [
      `https://127.0.0.2:${recorder.port}`,
      `https://127.0.0.1:${recorder.port}`,
      `http://127.0.0.1:${recorder.port}`,
      `https://[::1]:${recorder.port}`,
      `https://localhost:${recorder.port}`,
      'http://10.255.255.1',
      'https://169.254.169.254',
      'https://[fd00:ec2::254]',
    ];

    itStaysLocal(
      'an identity provider on loopback, private or metadata addresses ends in temporarily_unavailable, without a connection',
      async () => {
        for (const [index, issuer] of issuers().entries()) {
          const outcome = await signInThrough(server, spa, { issuer, idpId: `probe-${index}` });
          expectUnavailable(outcome, spa);
          expect(recorder.connections, `connections to the loopback recorder after ${issuer}`).to.equal(0);
        }
      },
    );
  });

  describe('sign-in in development (insecure loopback allowed)', () => {
    let server: TestServer;
    let spa: TestClient;
    let idp: TestHttpServer;

    before(async () => {
      server = await withServer();
      expect(server.config.outboundAllowInsecureLoopback).to.equal(true);
      spa = await registerPublicClient(server, 'http://127.0.0.1:1/development/callback');
      idp = await TestHttpServer.start(privateEndpointsIdp(() => idp.url));
    });

    after(async () => {
      await idp?.close();
    });

    itStaysLocal('a loopback http identity provider still signs users in', async () => {
      const devIdp = await startRegisteredDevIdp(server, { idpId: 'dev' });
      try {
        const agent = new FetchUserAgent();
        const request = await authorizationRequest(server, spa, { upstream_idp: 'dev' });
        const atClient = arrivingAt(spa.redirectUri);
        const back = await passDevIdpForms(agent, await agent.navigate(request.url, atClient), 'olga', atClient);
        expect(back.url.searchParams.get('code'), back.url.href).to.be.a('string');
      } finally {
        await devIdp.close();
      }
    });

    itStaysLocal('private and metadata issuers are refused even here, without a connection', async () => {
      for (const [index, issuer] of [
        'https://169.254.169.254',
        'http://169.254.169.254',
        'http://10.255.255.1',
        'https://[fd00:ec2::254]',
        'http://0xa9fea9fe',
      ].entries()) {
        expectUnavailable(await signInThrough(server, spa, { issuer, idpId: `private-${index}` }), spa);
      }
    });

    itStaysLocal(
      'a discovery document naming private token, userinfo and JWKS endpoints: refused, and the client secret is sent nowhere',
      async () => {
        const outcome = await signInThrough(server, spa, { issuer: idp.url, idpId: 'private-endpoints' });

        expectUnavailable(outcome, spa);
        expect(idp.requests.map((request) => request.path)).to.include('/.well-known/openid-configuration');
        expectNoSecretIn(idp.requests);
      },
    );

    itStaysLocal(
      "a client's jwks_uri on a private or metadata address is never fetched: private_key_jwt is invalid_client",
      async () => {
        const { privateKey } = await generateKeyPair('RS256');
        for (const [index, jwksUri] of [
          'https://10.0.0.1/jwks',
          'https://169.254.169.254/jwks',
          'https://[fd00:ec2::254]/jwks',
        ].entries()) {
          const clientId = `remote-keys-${index}`;
          const created = await server.admin('POST', '/clients', {
            clientId,
            clientType: 'confidential',
            tokenEndpointAuthMethod: 'private_key_jwt',
            jwksUri,
          });
          expect(created.status, JSON.stringify(created.body)).to.equal(201);
          const assertion = await new SignJWT({})
            .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
            .setIssuer(clientId)
            .setSubject(clientId)
            .setAudience(`${server.config.issuer}/token`)
            .setJti(`jti-${index}-${Date.now()}`)
            .setIssuedAt()
            .setExpirationTime('1m')
            .sign(privateKey);
          const response = await server.request('/token', {
            method: 'POST',
            headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({
              grant_type: 'client_credentials',
              client_id: clientId,
              client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
              client_assertion: assertion,
            }).toString(),
          });
          expect(response.status, jwksUri).to.equal(401);
          expect(((await response.json()) as any).error).to.equal('invalid_client');
        }
      },
    );

    itStaysLocal('endpoint overrides on private or metadata addresses are refused the same way', async () => {
      for (const [index, override] of [
        { tokenEndpoint: 'http://169.254.169.254/token' },
        { jwksUri: 'https://10.0.0.1/jwks' },
        { userinfoEndpoint: 'http://[fd00:ec2::254]/' },
      ].entries()) {
        expectUnavailable(
          await signInThrough(server, spa, { issuer: idp.url, idpId: `override-${index}`, ...override }),
          spa,
        );
      }
      expectNoSecretIn(idp.requests);
    });
  });
});

const IDP_SECRET = 'upstream-secret-that-must-stay-home';

function expectNoSecretIn(requests: RecordedRequest[]): void {
  for (const request of requests) {
    const basic = request.authorization?.replace(/^Basic /, '') ?? '';
    const seen = `${request.authorization ?? ''} ${Buffer.from(basic, 'base64').toString()} ${request.body}`;
    expect(seen, `${request.method} ${request.path}`).not.to.contain(IDP_SECRET);
  }
}

/**
 * A loopback upstream whose discovery document sends the token, userinfo and JWKS calls to
 * a private address; its /authorize approves at once, so an unguarded Arbiter would go on
 * to redeem the code there (with the client secret).
 */
function privateEndpointsIdp(issuer: () => string) {
  return (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? '/', issuer());
    if (url.pathname === '/.well-known/openid-configuration') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          issuer: issuer(),
          authorization_endpoint: `${issuer()}/authorize`,
          token_endpoint: 'http://10.0.0.1/token',
          userinfo_endpoint: 'http://10.0.0.1/userinfo',
          jwks_uri: 'http://10.0.0.1/jwks',
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
        }),
      );
      return;
    }
    if (url.pathname === '/authorize') {
      const back = new URL(url.searchParams.get('redirect_uri') ?? 'http://127.0.0.1:1/');
      back.search = new URLSearchParams({
        code: 'upstream-code',
        state: url.searchParams.get('state') ?? '',
        iss: issuer(),
      }).toString();
      response.writeHead(302, { location: back.href }).end();
      return;
    }
    response.writeHead(404).end();
  };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

async function expectRefused(promise: Promise<unknown>, what: string): Promise<void> {
  const error = await rejection(promise);
  expect(error, `${what}: ${String(error)}`).to.be.instanceOf(OutboundRefusedError);
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => resolve(body));
    request.on('error', reject);
  });
}

function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  const literal = host.replace(/^\[(.*)\]$/, '$1');
  return net.isIP(literal) !== 0 && ipaddr.process(literal).range() === 'loopback';
}

/**
 * Blocks and records every TCP connect of this process to anything but loopback (including
 * host names other than localhost), before the socket sends anything.
 */
class Tripwire {
  readonly attempts: string[] = [];
  private original?: typeof net.Socket.prototype.connect;

  install(): void {
    const original = (this.original = net.Socket.prototype.connect);
    const attempts = this.attempts;
    net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
      const host = destinationOf(args);
      if (host !== undefined && !isLoopback(host)) {
        attempts.push(host);
        process.nextTick(() => this.destroy(new Error(`test tripwire: connection to ${host} blocked`)));
        return this;
      }
      return (original as (...args: unknown[]) => net.Socket).apply(this, args);
    } as typeof net.Socket.prototype.connect;
  }

  uninstall(): void {
    if (this.original) net.Socket.prototype.connect = this.original;
  }
}

/** The TCP host of a Socket#connect call (undefined for IPC paths). */
function destinationOf(args: unknown[]): string | undefined {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (first !== null && typeof first === 'object') {
    const options = first as { path?: string | null; host?: string };
    // As net does: a (non-empty) path means IPC; https agents pass path: null.
    return options.path ? undefined : (options.host ?? 'localhost');
  }
  if (typeof first === 'string' && !/^\d+$/.test(first)) return undefined; // connect(path)
  return typeof args[1] === 'string' ? args[1] : 'localhost';
}

/** A TCP listener on 127.0.0.1, 127.0.0.2 and ::1 (one port) that counts the connections it receives. */
class ConnectionRecorder {
  connections = 0;
  private constructor(
    private readonly servers: net.Server[],
    readonly port: number,
  ) {}

  static async start(): Promise<ConnectionRecorder> {
    const listen = (host: string, port: number) =>
      new Promise<net.Server>((resolve, reject) => {
        const server = net.createServer((socket) => {
          recorder.connections += 1;
          socket.destroy();
        });
        server.once('error', reject);
        server.listen(port, host, () => resolve(server));
      });
    let recorder!: ConnectionRecorder;
    const first = await listen('127.0.0.1', 0);
    const port = (first.address() as net.AddressInfo).port;
    recorder = new ConnectionRecorder([first, await listen('127.0.0.2', port), await listen('::1', port)], port);
    return recorder;
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

interface RecordedRequest {
  method: string;
  path: string;
  authorization?: string;
  body: string;
}

/** A loopback HTTP server that records every request it receives. */
class TestHttpServer {
  readonly requests: RecordedRequest[] = [];
  private constructor(
    private readonly server: HttpServer,
    readonly port: number,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  static async start(
    handler: (request: IncomingMessage, response: ServerResponse, body: string) => void,
  ): Promise<TestHttpServer> {
    let recorded!: TestHttpServer;
    const answer = async (request: IncomingMessage, response: ServerResponse) => {
      const body = request.method === 'GET' ? '' : await readBody(request);
      recorded.requests.push({
        method: request.method ?? '',
        path: request.url ?? '',
        authorization: request.headers.authorization,
        body,
      });
      handler(request, response, body);
    };
    // The test's requests wait for the answer; a body that cannot be read fails them.
    const server = createHttpServer((request, response) => void answer(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    recorded = new TestHttpServer(server, (server.address() as net.AddressInfo).port);
    return recorded;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
