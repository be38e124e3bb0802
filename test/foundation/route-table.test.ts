import { expect } from 'chai';
import type { Context } from 'koa';
import { stepWatch } from '../../src/dispatch.js';
import { BUNDLE_PATH } from '../../src/policy/index.js';
import {
  registerPublicClient,
  signInForTokens,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
} from '../support/dev-idp.js';
import { basic, clientCredentials, clientToken, confidentialClient, postForm } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/** Issue 35: a client_credentials /token (and an introspection) runs at most this many Arbiter steps before oidc-provider answers. */
const MAX_STEPS = 12;

/** The steps of the route table each request ran (stepWatch), by request; OPA's bundle polls left out. */
class StepLog {
  private readonly requests: { ctx: Context; steps: string[] }[] = [];

  readonly watch = (ctx: Context, step: string): void => {
    if (ctx.originalUrl.startsWith(BUNDLE_PATH)) return;
    let entry = this.requests.find((each) => each.ctx === ctx);
    if (!entry) this.requests.push((entry = { ctx, steps: [] }));
    entry.steps.push(step);
  };

  /** The steps of the one request that carried `requestId`. */
  of(requestId: string): string[] {
    const found = this.requests.filter(({ ctx }) => ctx.get('x-request-id') === requestId);
    expect(found, `requests with X-Request-ID ${requestId}`).to.have.length(1);
    return found[0]!.steps;
  }

  /** What the requests since the last call ran: their number and every step of each. */
  drain(): { requests: number; steps: string[][] } {
    const drained = this.requests.splice(0);
    return { requests: drained.length, steps: drained.map(({ steps }) => steps) };
  }
}

describe('one route table: the steps a request runs', function () {
  const log = new StepLog();
  let server: TestServer;
  let secret: string;
  let idp: RegisteredDevIdp | undefined;

  before(async function () {
    // Its own server: the steps are watched only in an app built while stepWatch is set.
    stepWatch.onStep = log.watch;
    try {
      server = await readyServer();
    } finally {
      delete stepWatch.onStep;
    }
    secret = await confidentialClient(server, 'route-table-app', { scopes: ['read', 'introspection'] });
  });
  after(async function () {
    await idp?.close();
    await server?.close();
  });

  it(`runs at most ${MAX_STEPS} Arbiter steps for a client_credentials /token`, async function () {
    const { status } = await clientCredentials(server, 'route-table-app', secret, {}, { 'X-Request-ID': 'rt-token' });
    expect(status).to.equal(200);
    const steps = log.of('rt-token');
    console.log(`      /token: ${steps.join(' → ')}`);
    expect(steps.length, steps.join(' → ')).to.be.within(1, MAX_STEPS);
  });

  it(`runs at most ${MAX_STEPS} Arbiter steps for an introspection, Basic or Bearer caller, Arbiter's handler last`, async function () {
    const token = await clientToken(server, 'route-table-app', secret, { scope: 'introspection' });
    for (const [id, authorization] of [
      ['rt-introspect-basic', basic('route-table-app', secret)],
      ['rt-introspect-bearer', `Bearer ${token}`],
    ] as const) {
      const { status, body } = await postForm(
        server,
        '/introspect',
        { token },
        { Authorization: authorization, 'X-Request-ID': id },
      );
      expect(status, id).to.equal(200);
      expect(body.active, id).to.be.a('boolean');
      const steps = log.of(id);
      console.log(`      ${id}: ${steps.join(' → ')}`);
      expect(steps.length, `${id}: ${steps.join(' → ')}`).to.be.within(1, MAX_STEPS);
      // Arbiter's introspection handler answers: oidc-provider's own introspection never runs after it.
      expect(steps.at(-1), `${id}: ${steps.join(' → ')}`).to.equal('introspect');
    }
  });

  it('runs the probes, the tenant paths and a browser sign-in through the table', async function () {
    expect((await server.request('/livez', { headers: { 'X-Request-ID': 'rt-livez' } })).status).to.equal(200);
    expect(log.of('rt-livez')).to.deep.equal(['request', 'dispatch', 'metered', 'probe']);
    const byPath = await server.request('/t/route-table-none/token', {
      method: 'POST',
      headers: { 'X-Request-ID': 'rt-unknown-tenant' },
    });
    expect(byPath.status).to.equal(400);
    idp = await startRegisteredDevIdp(server);
    const spa = await registerPublicClient(server, 'https://spa.route-table.test/callback');
    log.drain();
    await signInForTokens(server, spa, 'alice');
    const signIn = log.drain();
    const most = Math.max(...signIn.steps.map((steps) => steps.length));
    // Reported for the before/after figures.
    console.log(
      `      sign-in: ${signIn.requests} requests, ${signIn.steps.flat().length} steps, at most ${most} per request`,
    );
    for (const steps of signIn.steps) console.log(`        ${steps.join(' → ')}`);
  });
});
