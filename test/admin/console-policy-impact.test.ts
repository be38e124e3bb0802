import { expect } from 'chai';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { signedInConsole, expectNoAxeViolations, openConsolePage } from '../support/browser.js';
import { clientCredentials, confidentialClient, eventually, policyInForce } from '../support/oauth.js';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';

const ARTIFACTS = join('test-artifacts', 'console-policy-impact');
const TOKEN_RULE = 'arbiter/token/token.rego';
const PACK_TOKEN_RULE = readFileSync(new URL('../../policies/arbiter/token/token.rego', import.meta.url), 'utf8');
const WITHOUT_WRITE = PACK_TOKEN_RULE.replace(
  'machine_scopes := lib.scopes_granted(requested, allowed, allowed) - lib.user_only_scopes',
  'machine_scopes := (lib.scopes_granted(requested, allowed, allowed) - lib.user_only_scopes) - {"write"}',
);

/**
 * The console's side of knowing a change before it is in force, in Chromium: the overview it
 * opens on (health, revisions, the last hour as a chart); a rule edited and tried against recent
 * traffic, with the flipped decisions linking to each audit entry's explanation; a change that
 * cannot decide refused next to its source; a change saved as a shadow, its differences from live
 * traffic listed, then promoted. Every view passes axe, and the CSP is never violated.
 */
describe('Console: policy impact and shadow policy, in Chromium', function () {
  let server: TestServer;
  let context: BrowserContext;
  let page: Page;
  let violations: string[];
  let secret: string;

  const writerToken = (scope: string) => clientCredentials(server, 'console-writer', secret, { scope });

  before(async function () {
    mkdirSync(ARTIFACTS, { recursive: true });
    // Its own server: the shadow is promoted into the shared bundle.
    server = await readyServer();
    secret = await confidentialClient(server, 'console-writer', { scopes: ['read', 'write'] });
    for (const scope of ['read write', 'read', 'read write', 'write'])
      expect((await writerToken(scope)).status).to.equal(200);
    ({ context, page, violations } = await signedInConsole(server.url, ADMIN_KEY));
  });

  after(async function () {
    await context?.close();
    await server?.close();
  });

  const openPage = (title: string) => openConsolePage(page, title);

  const expectAccessible = (what: string) => expectNoAxeViolations(page, what);

  async function editTokenRule(content: string): Promise<void> {
    await openPage('Policy changes');
    await page.getByLabel('What to change').selectOption('policy-rules');
    await page.locator('#policy-target option', { hasText: TOKEN_RULE }).waitFor({ state: 'attached' });
    await page.getByLabel('Record').selectOption({ label: TOKEN_RULE });
    await expect(await page.getByLabel('Source').inputValue()).to.contain('package arbiter.token');
    await page.getByLabel('Source').fill(content);
  }

  it('opens on the overview: health, the revision in force everywhere, the last hour per point as a chart', async function () {
    await page.getByRole('heading', { level: 2, name: 'Overview' }).waitFor();
    await page.getByText(/Server ok/).waitFor();
    await page.locator('figure.point-chart svg rect.bar-allow').first().waitFor();
    const caption = await page.locator('figure.point-chart figcaption').allTextContents();
    expect(caption).to.include('token: decisions per minute');
    const row = page
      .locator('table', { hasText: 'Decisions in the last hour by point' })
      .locator('tr', { hasText: 'token' });
    expect((await row.locator('td').allTextContents())[0]).to.equal('4');
    expect(await page.locator('.revisions dd').first().textContent()).to.match(/^[0-9a-f]{12}$/);
    await page.screenshot({ path: join(ARTIFACTS, '01-overview.png'), fullPage: true });
    await expectAccessible('overview');
  });

  it('tries an edited rule against recent traffic and lists the flipped decisions, each linking to its explanation', async function () {
    await editTokenRule(WITHOUT_WRITE);
    await page.getByRole('button', { name: 'Try against recent traffic' }).click();
    await page.getByRole('heading', { name: 'Impact on recent traffic' }).waitFor();
    const rows = page.locator('table.changes tbody tr');
    expect(await rows.count()).to.equal(3);
    const kinds = await page.locator('table.changes td.change').allTextContents();
    expect(kinds.sort()).to.deep.equal(['allowed → refused', 'narrower', 'narrower']);
    await page.screenshot({ path: join(ARTIFACTS, '02-impact.png'), fullPage: true });
    await expectAccessible('impact results');
    // Nothing changed meanwhile: the live answer still grants write.
    expect((await writerToken('read write')).body.scope).to.equal('read write');

    const link = rows.first().getByRole('link');
    const entry = await rows.first().getAttribute('data-entry');
    await link.click();
    await page.getByRole('heading', { level: 2, name: `Why? Audit entry ${entry}` }).waitFor();
    await page.getByText('Why, according to the engines now').waitFor();
    await expectAccessible('an explanation');
    await page.goBack();
    await page.getByRole('heading', { level: 2, name: 'Policy changes' }).waitFor();
  });

  it('fits the policy page with its impact results at 390 px wide: nothing scrolls sideways', async function () {
    const wide = page.viewportSize();
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await editTokenRule(WITHOUT_WRITE);
      await page.getByRole('button', { name: 'Try against recent traffic' }).click();
      await page.getByRole('heading', { name: 'Impact on recent traffic' }).waitFor();
      await page.locator('table.changes tbody tr').first().waitFor();
      expect(await page.evaluate('document.documentElement.scrollWidth')).to.be.at.most(390);
      await page.screenshot({ path: join(ARTIFACTS, '02-impact-narrow.png'), fullPage: true });
      await expectAccessible('impact results at 390 px');
    } finally {
      if (wide) await page.setViewportSize(wide);
    }
  });

  it('refuses a change that cannot decide with the engine’s message under the source, and applies nothing', async function () {
    await editTokenRule(`${PACK_TOKEN_RULE}\ndecision := {"allow": true}\n`);
    await page.getByRole('button', { name: 'Try against recent traffic' }).click();
    const error = page.locator('#policy-source-error');
    await error.waitFor();
    expect(await error.textContent()).to.contain('could not');
    expect(await page.getByLabel('Source').getAttribute('aria-invalid')).to.equal('true');
    await expectAccessible('a refused change');
  });

  it('saves the change as a shadow, lists its differences from live traffic, and promotes it', async function () {
    await editTokenRule(WITHOUT_WRITE);
    await page.getByRole('button', { name: 'Try against recent traffic' }).click();
    await page.getByRole('button', { name: 'Save as shadow' }).click();
    await page.getByText(/Saved as a shadow/).waitFor();
    await page.getByRole('heading', { name: 'Shadow policy' }).waitFor();
    // Live traffic decided by the live rule, evaluated against the shadow.
    expect((await writerToken('read write')).body.scope).to.equal('read write');
    await eventually(async () => {
      await page.getByRole('button', { name: 'Refresh' }).click();
      return (await page.locator('.shadow table.changes tbody tr').count()) >= 1;
    });
    expect(await page.locator('.shadow table.changes td.change').first().textContent()).to.equal('narrower');
    await page.screenshot({ path: join(ARTIFACTS, '03-shadow.png'), fullPage: true });
    await expectAccessible('shadow differences');

    await page.getByRole('button', { name: 'Promote the shadow' }).click();
    await page.getByText(/OPA now serves bundle revision/).waitFor();
    await policyInForce(server);
    expect((await writerToken('read write')).body.scope).to.equal('read');
    await page.getByText('No shadow records').waitFor();
  });

  it('never violated the CSP', function () {
    expect(violations).to.deep.equal([]);
  });
});
