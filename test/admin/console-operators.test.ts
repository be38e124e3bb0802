import { expect } from 'chai';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
import {
  sharedChromium,
  loopbackContext,
  recordCspViolations,
  expectNoAxeViolations,
  openConsolePage,
} from '../support/browser.js';
import { clientCredentials, confidentialClient, policyInForce } from '../support/oauth.js';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';
import { CLIENT_GRANT_TYPES, definitionFor } from '../../src/catalog/index.js';

const ARTIFACTS = join('test-artifacts', 'console-operators');

/** The widest a phone's page may be: nothing scrolls sideways at 390 px (an iPhone 14's width). */
const PHONE = { width: 390, height: 844 };

/**
 * The console as operators use it day to day, in Chromium: curated client forms (internal fields
 * hidden and kept, choices for enums and references, a secret generated and shown once), searched
 * and paged lists, tenants listed, created and switched to, an audit view without the console's own
 * reads, and every page usable at 390 px wide. Screenshots go to test-artifacts/console-operators/.
 */
describe('Console for operators, in Chromium', function () {
  let server: TestServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let violations: string[];
  let shot = 0;
  let generatedSecret = '';

  before(async function () {
    rmSync(ARTIFACTS, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
    // Its own server: the lists' totals and the audit log are counted exactly.
    server = await readyServer();
    browser = await sharedChromium();
    context = await loopbackContext(browser);
    violations = await recordCspViolations(context);
    page = await context.newPage();
    await page.goto(`${server.url}/admin`);
    await signIn(ADMIN_KEY);
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

  async function screenshot(name: string): Promise<void> {
    shot += 1;
    await page.screenshot({ path: join(ARTIFACTS, `${String(shot).padStart(2, '0')}-${name}.png`), fullPage: true });
  }

  const openPage = (title: string) => openConsolePage(page, title);

  const expectAccessible = (what: string) => expectNoAxeViolations(page, what);

  const form = () => page.locator('form.record-form');
  const field = (name: string) => form().locator(`[name="${name}"]`);
  const caption = () => page.locator('main .list-area caption');

  /** The JSON bodies the page sends to `path` with `method` while `act` runs. */
  async function bodiesSent(method: string, path: RegExp, act: () => Promise<void>): Promise<any[]> {
    const bodies: any[] = [];
    const listener = (request: Request) => {
      if (request.method() === method && path.test(new URL(request.url()).pathname))
        bodies.push(request.postDataJSON());
    };
    page.on('request', listener);
    try {
      await act();
    } finally {
      page.off('request', listener);
    }
    return bodies;
  }

  describe('a client form made for people', function () {
    it('shows what an operator sets, folds the rest, and hides what dynamic registration keeps', async function () {
      await openPage('Clients');
      await page.getByRole('button', { name: 'New client' }).click();
      for (const label of [
        'Registration access token digest',
        'Registration type',
        'Software statement',
        'Software statement JWT',
        'Client ID issued at',
        'Generate client secret',
      ])
        expect(await form().getByText(label, { exact: true }).count(), label).to.equal(0);
      const hidden = definitionFor('clients')!.console!.hidden!;
      for (const name of hidden) expect(await field(name).count(), name).to.equal(0);

      const grantTypes = form().getByRole('group', { name: 'Grant types' });
      // One per grant the catalog lets a client register (RFC 8628's device code among them).
      expect(await grantTypes.getByRole('checkbox').count()).to.equal(CLIENT_GRANT_TYPES.length);
      await grantTypes.getByRole('checkbox', { name: 'client_credentials' }).waitFor();
      expect(await field('tokenEndpointAuthMethod').evaluate((element) => element.tagName)).to.equal('SELECT');
      expect(await field('clientType').evaluate((element) => element.tagName)).to.equal('SELECT');

      const more = form().locator('details.advanced');
      expect(await more.getAttribute('open')).to.equal(null);
      expect(await field('jwksUri').isVisible()).to.equal(false);
      await more.locator('summary').click();
      expect(await field('jwksUri').isVisible()).to.equal(true);
      const visible = await form().locator('.field:visible').count();
      const schemaFields = Object.keys(definitionFor('clients')!.schema.properties as object).length;
      expect(visible, 'fewer fields than the schema has, even with "More settings" open').to.be.below(schemaFields);
      await more.locator('summary').click();
      expect(await form().locator('.field:visible').count()).to.be.at.most(9);
      await expectAccessible('client form');
      await screenshot('client-form');
    });

    it('has the server generate the secret and shows it once: nothing hashed in the browser, the secret works', async function () {
      await field('clientId').fill('gen-app');
      await field('clientName').fill('Generated app');
      expect(await form().getByLabel('Generate one (shown once, after saving)').isChecked()).to.equal(true);
      await form()
        .getByRole('group', { name: 'Grant types' })
        .getByRole('checkbox', { name: 'client_credentials' })
        .check();
      await field('scopes').fill('read');
      const [sent] = await bodiesSent('POST', /^\/admin\/api\/clients$/, async () => {
        await form().getByRole('button', { name: 'Save' }).click();
        await page
          .getByRole('alert')
          .getByText('Copy the client secret of gen-app now: it is shown only once.')
          .waitFor();
      });
      expect(sent).to.include({ clientId: 'gen-app', generateClientSecret: true });
      expect(sent).not.to.have.property('clientSecret');
      expect(sent.grantTypes).to.deep.equal(['client_credentials']);
      generatedSecret = (await page.getByRole('alert').locator('code').textContent()) ?? '';
      expect(generatedSecret).to.match(/^[A-Za-z0-9]{43}$/);
      await page.getByRole('row', { name: /gen-app/ }).waitFor();
      await screenshot('client-secret-shown-once');

      const granted = await clientCredentials(server, 'gen-app', generatedSecret, { scope: 'read' });
      expect(granted.status, JSON.stringify(granted.body)).to.equal(200);
      const stored = (await server.admin('GET', '/clients/gen-app')).body;
      expect(JSON.stringify(stored)).not.to.contain(generatedSecret);

      // Shown once: a list read again, or the record opened again, never shows it.
      await openPage('Subjects');
      await openPage('Clients');
      await page
        .getByRole('row', { name: /gen-app/ })
        .getByRole('button', { name: /^Edit/ })
        .click();
      expect(await page.locator('main').textContent()).not.to.contain(generatedSecret);
      expect(await form().getByLabel('Leave it as it is').isChecked()).to.equal(true);
      await form().getByRole('button', { name: 'Cancel' }).click();
    });

    it('rotates the secret: a new one generated and shown once, the old one refused from then on', async function () {
      await page
        .getByRole('row', { name: /gen-app/ })
        .getByRole('button', { name: /^Edit/ })
        .click();
      await form().getByLabel('Generate a new one (shown once, after saving)').check();
      await form().getByRole('button', { name: 'Save' }).click();
      const notice = page.getByRole('alert');
      await notice.getByText('Copy the client secret of gen-app now').waitFor();
      const rotated = (await notice.locator('code').textContent()) ?? '';
      expect(rotated)
        .to.match(/^[A-Za-z0-9]{43}$/)
        .and.not.equal(generatedSecret);
      expect((await clientCredentials(server, 'gen-app', generatedSecret, { scope: 'read' })).status).to.equal(401);
      expect((await clientCredentials(server, 'gen-app', rotated, { scope: 'read' })).status).to.equal(200);
      generatedSecret = rotated;
    });

    it("rotates the secret with a grace from the client's row: both secrets work until the grace ends", async function () {
      const previous = generatedSecret;
      await page
        .getByRole('row', { name: /gen-app/ })
        .getByRole('button', { name: /^Rotate secret/ })
        .click();
      await form().getByRole('heading', { name: 'Rotate the secret of gen-app' }).waitFor();
      await expectAccessible('the rotation form');
      const grace = form().getByLabel('Keep the previous secret valid for (seconds)');
      await grace.fill('-5');
      await form().getByRole('button', { name: 'Rotate' }).click();
      await form()
        .getByText(/^Not rotated: .*graceSeconds/)
        .waitFor();
      await grace.fill('600');
      const [sent] = await bodiesSent('POST', /^\/admin\/api\/clients\/gen-app\/secret$/, async () => {
        await form().getByRole('button', { name: 'Rotate' }).click();
        await page.getByText(/^Rotated the secret of gen-app: the previous one is valid until/).waitFor();
      });
      expect(sent).to.deep.equal({ graceSeconds: 600 });
      const rotated = (await page.getByRole('alert').locator('code').textContent()) ?? '';
      expect(rotated)
        .to.match(/^[A-Za-z0-9]{43}$/)
        .and.not.equal(previous);
      expect((await clientCredentials(server, 'gen-app', previous, { scope: 'read' })).status).to.equal(200);
      expect((await clientCredentials(server, 'gen-app', rotated, { scope: 'read' })).status).to.equal(200);
      // A rotation without grace ends the previous one's at once.
      const again = await server.admin('POST', '/clients/gen-app/secret', { graceSeconds: 0 });
      expect((await clientCredentials(server, 'gen-app', previous, { scope: 'read' })).status).to.equal(401);
      expect((await clientCredentials(server, 'gen-app', rotated, { scope: 'read' })).status).to.equal(401);
      generatedSecret = again.body.generatedClientSecret;
    });

    it('offers no secret to a public client and sends none', async function () {
      await page.getByRole('button', { name: 'New client' }).click();
      await field('clientId').fill('spa-app');
      await field('clientType').selectOption('public');
      expect(await form().getByRole('group', { name: 'Client secret' }).isVisible()).to.equal(false);
      const [sent] = await bodiesSent('POST', /^\/admin\/api\/clients$/, async () => {
        await form().getByRole('button', { name: 'Save' }).click();
        await page.getByText('Saved spa-app.').waitFor();
      });
      expect(sent).to.include({ clientId: 'spa-app', clientType: 'public' });
      expect(sent).not.to.have.any.keys('clientSecret', 'generateClientSecret');
    });

    it('keeps what dynamic registration stored when an operator edits the client', async function () {
      const registered = {
        clientId: 'registered-app',
        clientType: 'public',
        registrationType: 'dcr',
        softwareStatement: { software_id: 'b3f0c0de-0000-4000-8000-000000000001', iss: 'https://vendor.test' },
        softwareId: 'b3f0c0de-0000-4000-8000-000000000001',
        clientIdIssuedAt: 1_700_000_000,
        redirectUris: ['https://app.test/callback'],
      };
      expect((await server.admin('POST', '/clients', registered)).status).to.equal(201);
      await openPage('Subjects');
      await openPage('Clients');
      await page
        .getByRole('row', { name: /registered-app/ })
        .getByRole('button', { name: /^Edit/ })
        .click();
      await field('clientName').fill('Registered, renamed');
      await form().getByRole('button', { name: 'Save' }).click();
      await page.getByText('Saved registered-app.').waitFor();
      const stored = (await server.admin('GET', '/clients/registered-app')).body;
      expect(stored).to.deep.include({
        clientName: 'Registered, renamed',
        registrationType: 'dcr',
        softwareStatement: registered.softwareStatement,
        softwareId: registered.softwareId,
        clientIdIssuedAt: registered.clientIdIssuedAt,
        redirectUris: registered.redirectUris,
      });
    });

    it('offers the records a reference may name as a choice, by their key and name', async function () {
      const client = (await server.admin('GET', '/clients/gen-app')).body;
      await openPage('Resource servers');
      await page.getByRole('button', { name: 'New resource server' }).click();
      await field('resourceIndicator').fill('https://api.console.test/');
      const choice = form().getByLabel('Client', { exact: true });
      await choice.locator(`option[value="${client.id}"]`).waitFor({ state: 'attached' });
      expect(await choice.locator(`option[value="${client.id}"]`).textContent()).to.equal(
        `gen-app — Generated app (#${client.id})`,
      );
      await choice.selectOption(String(client.id));
      await form().getByRole('button', { name: 'Save' }).click();
      await page.getByText(/^Saved \d+\.$/).waitFor();
      const [stored] = (await server.admin('GET', '/resource-servers?q=api.console.test')).body;
      expect(stored.clientId).to.equal(client.id);
      await expectAccessible('resource servers after a save');
    });
  });

  describe('lists with search and pages', function () {
    before(async function () {
      for (let index = 1; index <= 25; index += 1) {
        const subject = { subjectId: `sub-${String(index).padStart(2, '0')}`, name: `Person ${index}` };
        expect((await server.admin('POST', '/subjects', subject)).status).to.equal(201);
      }
    });

    it('pages a list by 20 and says where the page is in the total', async function () {
      await openPage('Subjects');
      await caption().getByText('Subjects: 1–20 of 25').waitFor();
      expect(await page.locator('main tbody tr').count()).to.equal(20);
      await page.getByRole('button', { name: 'Next page' }).click();
      await caption().getByText('Subjects: 21–25 of 25').waitFor();
      expect(await page.locator('main tbody tr').count()).to.equal(5);
      expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).to.equal(true);
      await page.getByRole('button', { name: 'Previous page' }).click();
      await caption().getByText('Subjects: 1–20 of 25').waitFor();
    });

    it('searches a substring of the key or name without case, and metacharacters as themselves', async function () {
      const search = page.getByRole('search', { name: 'Search subjects' });
      await search.getByLabel('Search').fill('SUB-07');
      await search.getByRole('button', { name: 'Search' }).click();
      await caption().getByText('Subjects matching “SUB-07”: 1–1 of 1').waitFor();
      await page.getByRole('row', { name: /sub-07/ }).waitFor();
      await search.getByLabel('Search').fill('person 1');
      await search.getByRole('button', { name: 'Search' }).click();
      await caption().getByText('Subjects matching “person 1”: 1–11 of 11').waitFor();
      await search.getByLabel('Search').fill('.*');
      await search.getByRole('button', { name: 'Search' }).click();
      await page.getByText('No subjects match “.*”.').waitFor();
      await screenshot('subjects-searched');
      await search.getByLabel('Search').fill('');
      await search.getByRole('button', { name: 'Search' }).click();
      await caption().getByText('Subjects: 1–20 of 25').waitFor();
    });

    it('shows a record just created on the page where it is', async function () {
      await page.getByRole('button', { name: 'New subject' }).click();
      await field('subjectId').fill('newest');
      await form().getByRole('button', { name: 'Save' }).click();
      await caption().getByText('Subjects: 21–26 of 26').waitFor();
      await page.getByRole('row', { name: /newest/ }).waitFor();
    });
  });

  describe('tenants', function () {
    it('creates a tenant on the Tenants page, refuses a malformed one, and switches to it', async function () {
      await openPage('Tenants');
      await page.getByLabel('Tenant ID').fill('bad id');
      await page.getByRole('button', { name: 'Create tenant' }).click();
      await page.getByText(/^Not created: /).waitFor();
      expect(await page.getByLabel('Tenant ID').getAttribute('aria-invalid')).to.equal('true');

      await page.getByLabel('Tenant ID').fill('ops-eu');
      await page.getByRole('button', { name: 'Create tenant' }).click();
      await page.getByText('Created tenant ops-eu.').waitFor();
      await caption().getByText('Tenants matching “ops-eu”: 1–1 of 1').waitFor();
      expect((await server.admin('GET', '/tenants/ops-eu')).status).to.equal(200);
      // The banner offers it at once.
      await page.getByLabel('Tenant', { exact: true }).locator('option[value="ops-eu"]').waitFor({ state: 'attached' });
      await expectAccessible('tenants page');
      await screenshot('tenants');

      await page.getByRole('button', { name: 'Switch to ops-eu' }).click();
      await page.getByText('Showing tenant ops-eu').waitFor();
      await page
        .getByRole('row', { name: /ops-eu/ })
        .getByText('Shown now')
        .waitFor();
      await openPage('Clients');
      await page.getByText('No clients in this tenant yet.').waitFor();
    });

    it('switches back with the choice in the banner, which lists the tenants that exist', async function () {
      const choice = page.getByLabel('Tenant', { exact: true });
      await choice.locator('option[value="ops-eu"]').waitFor({ state: 'attached' });
      expect(
        await choice.locator('option').evaluateAll((options) => options.map((option) => option.getAttribute('value'))),
      ).to.deep.equal(['', 'ops-eu']);
      await choice.selectOption('');
      await page.getByRole('button', { name: 'Switch' }).click();
      await page.getByText('Showing the default tenant').waitFor();
      await page.getByRole('row', { name: /gen-app/ }).waitFor();
    });
  });

  describe("the audit log, without the console's own reads", function () {
    it("lists the operator's writes but not the console's page loads, unless asked", async function () {
      const marked = (await server.admin('GET', '/audit-logs?size=1000')).body.content.filter(
        (entry: { consoleRead?: boolean }) => entry.consoleRead,
      );
      expect(marked.length, 'the console marked its reads').to.be.greaterThan(10);
      for (const entry of marked) expect(entry.method).to.equal('GET');

      await openPage('Audit log');
      await page.getByLabel('Endpoint').fill('/admin/api/clients');
      await page.getByRole('button', { name: 'Filter' }).click();
      // gen-app and spa-app from the console, registered-app from the API; no console read.
      await page.getByText('3 entries.', { exact: true }).waitFor();
      const requests = await page.locator('main tbody tr td:nth-child(3)').allTextContents();
      expect(
        requests.filter((request) => request.startsWith('GET ')),
        'no console read',
      ).to.deep.equal([]);
      expect(requests.filter((request) => request.startsWith('POST '))).to.have.length(3);

      await page.getByLabel("Include the console's own reads").check();
      await page.getByRole('button', { name: 'Filter' }).click();
      await page
        .getByText(/^GET \/admin\/api\/clients$/)
        .first()
        .waitFor();
    });
  });

  describe('the audit log by outcome, in UTC', function () {
    it('filters by outcome and shows 24-hour times labelled UTC', async function () {
      expect((await server.admin('POST', '/clients', { clientType: 'sideways' })).status).to.equal(400);
      const denied = (
        await server.admin('GET', '/audit-logs?endpoint=/admin/api/clients&outcome=deny&hideConsoleReads=true')
      ).body.totalElements as number;
      expect(denied).to.be.at.least(1);
      await openPage('Audit log');
      await page.getByLabel('Endpoint').fill('/admin/api/clients');
      await page.getByLabel('Outcome').selectOption({ label: 'Denied' });
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.getByText(`${denied} entries.`, { exact: true }).waitFor();
      const outcomes = await page.locator('main tbody tr td:nth-child(4)').allTextContents();
      expect(outcomes.length).to.be.at.least(1);
      expect(outcomes.filter((outcome) => outcome !== 'deny')).to.deep.equal([]);
      expect(await page.locator('main thead th').nth(1).textContent()).to.equal('Time (UTC)');
      for (const time of await page.locator('main tbody tr td:nth-child(2)').allTextContents())
        expect(time).to.match(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
      await page.getByLabel('Outcome').selectOption({ label: 'Any' });
    });

    it('filters by a time range typed in UTC', async function () {
      await openPage('Audit log');
      await page.getByLabel('Endpoint').fill('/admin/api/clients');
      await page.getByLabel('From (UTC)').fill('2020-01-01 00:00');
      await page.getByLabel('To (UTC)').fill('2020-01-02');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.getByText('No entries match.').waitFor();
      const hourAgo = new Date(Date.now() - 3_600_000).toISOString().slice(0, 16).replace('T', ' ');
      await page.getByLabel('From (UTC)').fill(hourAgo);
      await page.getByLabel('To (UTC)').fill('');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.locator('main tbody tr').first().waitFor();
      for (const time of await page.locator('main tbody tr td:nth-child(2)').allTextContents())
        expect(time.slice(0, 16) >= hourAgo, time).to.equal(true);
      await page.getByLabel('From (UTC)').fill('');
    });
  });

  describe("revoking a client's tokens", function () {
    it('revokes them on the second click of "Revoke tokens", and the client stays', async function () {
      await policyInForce(server);
      const secret = await confidentialClient(server, 'revoked-app', { scopes: ['read'] });
      for (let round = 0; round < 2; round += 1)
        expect((await clientCredentials(server, 'revoked-app', secret, { scope: 'read' })).status).to.equal(200);
      await openPage('Clients');
      const search = page.getByRole('search', { name: 'Search clients' });
      await search.getByLabel('Search').fill('revoked-app');
      await search.getByRole('button', { name: 'Search' }).click();
      // The searched list has replaced the whole one (whose rows, revoked-app's too, a re-render would reset).
      await page.getByRole('row', { name: /gen-app/ }).waitFor({ state: 'detached' });
      const row = page.getByRole('row', { name: /revoked-app/ });
      await row.getByRole('button', { name: /^Revoke tokens/ }).click();
      const revoke = row.getByRole('button', { name: /^Revoke tokens/ }).filter({ hasText: 'Confirm revoke tokens' });
      await revoke.waitFor();
      await revoke.click();
      await page.getByText('Revoked 2 tokens, codes and grants of revoked-app.').waitFor();
      expect((await server.admin('POST', '/clients/revoked-app/revoke-tokens')).body, 'none left').to.deep.equal({
        revoked: 0,
      });
      expect((await server.admin('GET', '/clients/revoked-app')).status, 'the client stays').to.equal(200);
      // The lists after this one count on the clients and the search they had.
      expect((await server.admin('DELETE', '/clients/revoked-app')).status).to.equal(204);
      await search.getByLabel('Search').fill('');
      await search.getByRole('button', { name: 'Search' }).click();
    });
  });

  describe('what a read-only key is offered', function () {
    it('lists everything, and offers no "New" button and no tenant creation', async function () {
      const key = (await server.admin('POST', '/api-keys', { name: 'viewer', role: 'read-only' })).body.key as string;
      await page.getByRole('button', { name: 'Sign out' }).click();
      await signIn(key);
      await openPage('Clients');
      await page.getByRole('row', { name: /gen-app/ }).waitFor();
      expect(await page.getByRole('button', { name: 'New client' }).count()).to.equal(0);
      await openPage('Tenants');
      await page.getByRole('row', { name: /ops-eu/ }).waitFor();
      expect(await page.getByRole('button', { name: 'Create tenant' }).count()).to.equal(0);
      await page.getByRole('button', { name: 'Sign out' }).click();
      await signIn(ADMIN_KEY);
    });
  });

  describe('at 390 px wide', function () {
    before(async function () {
      await page.setViewportSize(PHONE);
    });

    /** How wide the page is: at most the viewport when nothing overflows sideways. */
    const pageWidth = () => page.evaluate('document.scrollingElement.scrollWidth') as Promise<number>;

    it('fits every page, with its form and its folded settings open, and stays accessible', async function () {
      const titles = await page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents();
      expect(titles.length).to.be.at.least(13);
      for (const title of titles) {
        await openPage(title);
        if (await page.locator('main .list-area').count()) await page.locator('main .list-area > *').first().waitFor();
        expect(await pageWidth(), title).to.be.at.most(PHONE.width);
        const create = page.getByRole('button', { name: /^New / });
        if (await create.count()) {
          await create.click();
          await form().waitFor();
          const more = form().locator('details.advanced > summary');
          if (await more.count()) await more.click();
          expect(await pageWidth(), `${title}, form open`).to.be.at.most(PHONE.width);
        }
        await expectAccessible(`${title} at 390 px`);
        await screenshot(`narrow-${title.toLowerCase().replace(/\W+/g, '-')}`);
      }
    });

    it('fits a list of records with long keys, and a decision explained', async function () {
      const long = `a-client-with-a-very-long-identifier-${'x'.repeat(80)}`;
      expect(
        (
          await server.admin('POST', '/clients', {
            clientId: long,
            clientType: 'public',
            redirectUris: [`https://app.test/${'y'.repeat(120)}`],
          })
        ).status,
      ).to.equal(201);
      await openPage('Clients');
      await page.getByText(/^Clients: 1–\d+ of \d+$/).waitFor();
      await page.getByRole('row', { name: new RegExp(long) }).waitFor();
      expect(await pageWidth()).to.be.at.most(PHONE.width);
      await page
        .getByRole('row', { name: new RegExp(long) })
        .getByRole('button', { name: /^Edit/ })
        .click();
      await form().waitFor();
      expect(await pageWidth()).to.be.at.most(PHONE.width);
      await screenshot('narrow-long-client');

      await openPage('Decision playground');
      await page.getByRole('button', { name: 'Decide' }).click();
      await page.locator('section.answer .explanation').waitFor();
      expect(await pageWidth()).to.be.at.most(PHONE.width);
      await expectAccessible('decision explained at 390 px');
      await screenshot('narrow-playground');
    });

    it('never broke a CSP rule', function () {
      expect(violations).to.deep.equal([]);
    });
  });
});
