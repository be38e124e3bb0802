import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  sharedChromium,
  loopbackContext,
  recordCspViolations,
  recordRequests,
  expectNoAxeViolations,
  openConsolePage,
} from '../support/browser.js';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';

/**
 * The console with named keys, in Chromium, served on the admin listener (ADMIN_PORT): an admin
 * makes an operator key on the API keys page (shown once), the operator signs in with it, sees
 * who they are, cannot manage keys, gets the API's 403 when they try a policy change, and is
 * signed out as soon as their key is revoked.
 */
describe('Console sign-in with named Admin API keys, on the admin port, in Chromium', function () {
  let server: TestServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let requested: string[];
  let violations: string[];
  let operatorKey = '';

  before(async function () {
    // Its own server: the console on an admin listener, and keys made and revoked by the journey.
    server = await readyServer({ ADMIN_PORT: '0' });
    browser = await sharedChromium();
    context = await loopbackContext(browser);
    requested = recordRequests(context);
    violations = await recordCspViolations(context);
    page = await context.newPage();
  });

  after(async function () {
    await context?.close();
    await server?.close();
  });

  async function signIn(key: string): Promise<void> {
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await page.getByLabel('Admin API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
  }

  const openPage = (title: string) => openConsolePage(page, title);

  const expectAccessible = (what: string) => expectNoAxeViolations(page, what);

  it('signs in with the bootstrap key and says so', async function () {
    await page.goto(`${server.adminUrl}/admin`);
    await signIn(ADMIN_KEY);
    await page.getByText('Signed in as bootstrap (admin)').waitFor();
  });

  it('makes an operator key on the API keys page and shows it once', async function () {
    await openPage('API keys');
    await expectAccessible('API keys page (admin)');
    await page.getByLabel('Name', { exact: true }).fill('console operator');
    await page.getByLabel('Role').selectOption('operator');
    await page.getByLabel('Description (optional)').fill('made in the console test');
    await page.getByRole('button', { name: 'Create key' }).click();
    const notice = page.getByRole('alert');
    await notice.getByText('Copy the key of console operator (operator) now').waitFor();
    operatorKey = (await notice.locator('code').textContent()) ?? '';
    expect(operatorKey).to.match(/^arbiter_admin_/);
    const row = page.getByRole('row', { name: /console operator/ });
    await row.waitFor();
    expect(await row.textContent())
      .to.contain('operator')
      .and.contain('bootstrap')
      .and.not.contain(operatorKey);
    const stored = await server.admin('GET', '/api-keys');
    expect(stored.body.map((key: { name: string }) => key.name)).to.include('console operator');
  });

  it('signs the operator in with the named key: their name and role, no key management', async function () {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await signIn(operatorKey);
    await page.getByText('Signed in as console operator (operator)').waitFor();
    await openPage('API keys');
    await page.getByText("Your key's role (operator) cannot create or revoke keys.").waitFor();
    expect(await page.getByRole('button', { name: 'Create key' }).count()).to.equal(0);
    expect(await page.getByRole('button', { name: /^Revoke/ }).count()).to.equal(0);
    await expectAccessible('API keys page (operator)');
  });

  it("shows the API's 403 when the operator tries a policy change, and changes nothing", async function () {
    const before = await server.admin('GET', '/policy-rules');
    await openPage('Policy rules');
    const remove = page.getByRole('button', { name: /^Delete / }).first();
    // Two clicks, as the console asks: the first arms the button (its label stays "Delete …"), the second deletes.
    await remove.click();
    await remove.click();
    await page
      .getByText(/has the role operator; DELETE \/admin\/api\/policy-rules\/\d+ needs the role policy-author or admin/)
      .waitFor();
    expect((await server.admin('GET', '/policy-rules')).body).to.deep.equal(before.body);
  });

  it('signs the operator out once the key is revoked', async function () {
    const keys = await server.admin('GET', '/api-keys');
    const { id } = keys.body.find((key: { name: string }) => key.name === 'console operator');
    expect((await server.admin('DELETE', `/api-keys/${id}`)).status).to.equal(204);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Clients', exact: true }).click();
    await page.getByText('The Admin API key was refused: sign in again.').waitFor();
  });

  it('kept the keys out of every URL, and broke no CSP rule', function () {
    for (const url of requested) {
      expect(url).not.to.contain(operatorKey);
      expect(url).not.to.contain(ADMIN_KEY);
      expect(url.startsWith(`${server.adminUrl}/`), url).to.equal(true);
    }
    expect(violations).to.deep.equal([]);
  });
});
