import { expect } from 'chai';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { signedInConsole, expectNoAxeViolations, openConsolePage } from '../support/browser.js';
import { clientCredentials, clientWithToken, confidentialClient, eventually, postForm } from '../support/oauth.js';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';
import { PushReceiver, SetVerifier } from '../support/ssf-receiver.js';

const ARTIFACTS = join('test-artifacts', 'console-signals');
const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const APP = 'console-signals-app';
const RECEIVER = 'console-signals-receiver';

/**
 * Issue 40 in the console, in Chromium: the Shared Signals page shows the tenant's streams and
 * what waits for each in a real outbox (a push receiver that is down: its SET pending and
 * retrying, with why; then delivered, counted by the node), and the policy-change page says how
 * many live tokens and receivers a change would signal before it is applied, plainly when no
 * receiver listens. Every view passes axe, and the CSP is never violated.
 */
describe('Console: Shared Signals delivery and what a policy change signals, in Chromium', function () {
  let server: TestServer;
  let context: BrowserContext;
  let page: Page;
  let violations: string[];
  const receiver = new PushReceiver();

  before(async function () {
    mkdirSync(ARTIFACTS, { recursive: true });
    // Its own server: the outbox's node-wide counts are asserted, and the receiver's stream covers every subject.
    server = await readyServer({ OUTBOX_POLL_MS: '200', OUTBOX_RETRY_MAX_SECONDS: '1' });
    receiver.refuse = true;
    receiver.verifier = new SetVerifier(
      `${server.config.issuer}/.well-known/jwks.json`,
      server.config.issuer,
      RECEIVER,
    );
    // A live token of APP, introspected once (allowed): its decision is recorded, so a change can be replayed on it.
    const secret = await confidentialClient(server, APP, { scopes: ['read'] });
    const issued = await clientCredentials(server, APP, secret, { scope: 'read' });
    const { token: caller } = await clientWithToken(server, 'console-signals-rs', ['introspection']);
    const answer = await postForm(
      server,
      '/introspect',
      { token: issued.body.access_token as string },
      { Authorization: `Bearer ${caller}` },
    );
    expect(answer.body.active).to.equal(true);
    // The recheck and its preview read the decision from the audit log, written in batches.
    await eventually(
      async () => (await server.admin('GET', '/audit-logs?endpoint=/introspect')).body.content.length > 0,
    );
    ({ context, page, violations } = await signedInConsole(server.url, ADMIN_KEY));
  });

  after(async function () {
    await context?.close();
    await server?.close();
    await receiver.close();
  });

  const openPage = (title: string) => openConsolePage(page, title);

  const expectAccessible = (what: string) => expectNoAxeViolations(page, what);

  /** The introspect rule refusing APP's tokens, tried against recent traffic on the policy-change page. */
  async function tryRefusingApp(): Promise<string> {
    await openPage('Policy changes');
    await page.getByLabel('What to change').selectOption('policy-rules');
    const option = page.locator('#policy-target option', { hasText: 'introspect.rego' });
    await option.first().waitFor({ state: 'attached' });
    await page.getByLabel('Record').selectOption({ label: (await option.first().textContent())! });
    const source = await page.getByLabel('Source').inputValue();
    const refusing = source.replace(
      'caller_entitled if {',
      `caller_entitled if {\n\tnot startswith(input.token.client_id, "${APP}")`,
    );
    expect(refusing).not.to.equal(source);
    await page.getByLabel('Source').fill(refusing);
    await page.getByRole('button', { name: 'Try against recent traffic' }).click();
    await page.getByRole('heading', { name: 'Impact on recent traffic' }).waitFor();
    return (await page.locator('.impact-signals').textContent()) ?? '';
  }

  /** The stream's row once `done` holds of it, refreshing the page meanwhile. */
  async function streamRow(done: (cells: Record<string, string>) => boolean): Promise<Record<string, string>> {
    let cells: Record<string, string> = {};
    await eventually(async () => {
      await page.getByRole('button', { name: 'Refresh' }).click();
      await page.getByText(/^Read at /).waitFor();
      const row = page.locator('table.streams tbody tr').first();
      if ((await row.count()) === 0) return false;
      cells = Object.fromEntries(
        await row
          .locator('th, td')
          .evaluateAll((each) => each.map((cell) => [cell.dataset.label ?? '', cell.textContent ?? ''])),
      );
      return done(cells);
    });
    return cells;
  }

  it('says plainly that a policy change tells nobody while no receiver has a stream', async function () {
    expect(await tryRefusingApp()).to.equal('Shared Signals: applying it tells no receiver.');
    await openPage('Shared Signals');
    await page.getByText('No receiver has a stream in this tenant').waitFor();
    await page.getByText('Nothing waits: every event of this tenant has been delivered.').waitFor();
    await expectAccessible('the Shared Signals page without streams');
  });

  it('counts the live tokens and receivers a policy change would signal, before it is applied', async function () {
    const { token } = await clientWithToken(server, RECEIVER, ['ssf.manage']);
    const created = await server.request('/ssf/streams', {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      json: {
        delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: await receiver.start() },
        events_requested: [SESSION_REVOKED],
      },
    });
    expect(created.status).to.equal(201);
    const line = await tryRefusingApp();
    expect(line).to.match(/^Applying it tells 1 receiver stream about 1 live token it refuses or narrows/);
    await page.screenshot({ path: join(ARTIFACTS, '01-policy-change-signals.png'), fullPage: true });
    await expectAccessible('impact results with their signals');
    // Tried, not applied: nothing was sent.
    expect(receiver.received).to.have.length(0);
    await page.getByRole('button', { name: 'Discard' }).click();
  });

  it('shows a SET pending and retrying, with why, while its receiver is down; then delivered', async function () {
    await openPage('Shared Signals');
    const revoked = await server.admin('POST', `/clients/${APP}/revoke-tokens`);
    expect(revoked.status).to.equal(200);
    const failing = await streamRow((cells) => cells.Retrying === '1');
    expect(failing).to.include({ Receiver: RECEIVER, Status: 'enabled', Pending: '1', Retrying: '1' });
    expect(failing.Delivery).to.match(/^Push to http:\/\/127\.0\.0\.1:\d+\/events$/);
    expect(failing.Events).to.equal('session-revoked (every subject)');
    expect(failing['Last failure']).to.match(/^the push receiver answered 503 \(\d+ attempts?; next attempt /);
    const topic = page.locator('table.topics tr[data-topic="ssf"]');
    expect(await topic.locator('td.pending').textContent()).to.equal('1');
    expect(await page.locator('#node-failing').textContent()).to.equal('1');
    await page.screenshot({ path: join(ARTIFACTS, '02-receiver-down.png'), fullPage: true });
    await expectAccessible('a stream whose receiver is down');

    const deliveredBefore = Number(await page.locator('#node-delivered').textContent());
    receiver.refuse = false;
    await receiver.setsReceived(1);
    const delivered = await streamRow((cells) => cells.Pending === '0');
    expect(delivered).to.include({ Retrying: '0', 'Oldest pending': '—', 'Last failure': '—' });
    expect(Number(await page.locator('#node-delivered').textContent())).to.be.above(deliveredBefore);
    // This node's counts per topic: the SET's failed attempts and its delivery.
    const nodeTopic = page.locator('table.node-topics tr[data-topic="ssf"]');
    expect(Number(await nodeTopic.locator('td.failures').textContent())).to.be.above(0);
    expect(Number(await nodeTopic.locator('td.delivered').textContent())).to.be.above(0);
    expect(await nodeTopic.locator('td.given-up-tenant-gone').textContent()).to.equal('0');
    await page.getByText('Nothing waits: every event of this tenant has been delivered.').waitFor();
  });

  it('fits the Shared Signals page at 390 px wide: nothing scrolls sideways', async function () {
    const wide = page.viewportSize();
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await openPage('Shared Signals');
      await page.locator('table.streams tbody tr').first().waitFor();
      expect(await page.evaluate('document.documentElement.scrollWidth')).to.be.at.most(390);
      await expectAccessible('the Shared Signals page at 390 px');
    } finally {
      if (wide) await page.setViewportSize(wide);
    }
  });

  it('never violated the CSP', function () {
    expect(violations).to.deep.equal([]);
  });
});
