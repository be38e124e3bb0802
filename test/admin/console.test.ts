import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  sharedChromium,
  loopbackContext,
  recordCspViolations,
  recordRequests,
  expectNoAxeViolations,
  openConsolePage,
} from '../support/browser.js';
import { clientCredentials } from '../support/oauth.js';
import { rawRequest } from '../support/raw-http.js';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';
import { AUDIT_LOG_COLLECTION } from '../../src/audit/collections.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';

const ARTIFACTS = join('test-artifacts', 'console');

/** What the page shows as focused: enough to follow keyboard navigation. */
const FOCUSED = `(() => {
  const element = document.activeElement;
  return { id: element.id, tag: element.tagName, text: (element.textContent || '').trim(), inNavigation: !!element.closest('nav[aria-label="Main"]') };
})()`;

interface Focused {
  id: string;
  tag: string;
  text: string;
  inNavigation: boolean;
}

/**
 * The operators' console as a person uses it, in Debian's Chromium: sign in with the Admin API
 * key, add an identity provider and a client, break a Rego rule and see the engine's error, fix
 * it and see the revision OPA serves, then find a refused request in the audit log and ask why.
 * Along the way: the strict CSP holds (no violation), the key is never in a URL or the log, and
 * every page passes axe and can be used from the keyboard. Screenshots go to test-artifacts/console/.
 */
describe("Operators' console at /admin, in Chromium", function () {
  let server: TestServer;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let requested: string[];
  let violations: string[];
  const logLines: string[] = [];
  let shot = 0;

  before(async function () {
    rmSync(ARTIFACTS, { recursive: true, force: true });
    mkdirSync(ARTIFACTS, { recursive: true });
    // Its own server: the journey changes the policy bundle. Info-level logs, to look for the key in them.
    server = await readyServer(
      { LOG_LEVEL: 'info' },
      { logStream: { write: (line: string) => void logLines.push(line) } },
    );
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

  async function screenshot(name: string): Promise<void> {
    shot += 1;
    await page.screenshot({ path: join(ARTIFACTS, `${String(shot).padStart(2, '0')}-${name}.png`), fullPage: true });
  }

  const focused = () => page.evaluate(FOCUSED) as Promise<Focused>;

  /** Presses Tab until `reached` holds for the focused element; fails after `limit` presses. */
  async function tabUntil(reached: (focus: Focused) => boolean, limit = 20): Promise<Focused> {
    for (let presses = 0; presses < limit; presses += 1) {
      await page.keyboard.press('Tab');
      const focus = await focused();
      if (reached(focus)) return focus;
    }
    throw new Error(`Tab did not reach the element within ${limit} presses (last: ${JSON.stringify(await focused())})`);
  }

  const expectAccessible = (what: string) => expectNoAxeViolations(page, what);

  const openPage = (title: string) => openConsolePage(page, title);

  const form = () => page.locator('form.record-form');
  const field = (name: string) => form().locator(`[name="${name}"]`);
  const errorOf = (name: string) => form().locator(`.field:has([name="${name}"]) .field-error`);

  describe('serving', function () {
    it('serves the page and its assets with the strict CSP, their content types and revalidation', async function () {
      for (const [path, type] of [
        ['/admin', 'text/html; charset=utf-8'],
        ['/admin/assets/console.js', 'text/javascript; charset=utf-8'],
        ['/admin/assets/console.css', 'text/css; charset=utf-8'],
        ['/admin/assets/icon.svg', 'image/svg+xml'],
      ] as const) {
        const response = await server.request(path);
        expect(response.status, path).to.equal(200);
        expect(response.headers.get('content-type'), path).to.equal(type);
        const csp = response.headers.get('content-security-policy') ?? '';
        expect(csp, path)
          .to.contain("default-src 'none'")
          .and.contain("script-src 'self'")
          .and.contain("frame-ancestors 'none'");
        expect(csp, path).not.to.contain('unsafe-inline').and.not.to.contain('unsafe-eval');
        expect(response.headers.get('cache-control'), path).to.equal('no-cache');
        const etag = response.headers.get('etag');
        expect(etag, path).to.be.a('string');
        // Raw HTTP: fetch would add Cache-Control: no-cache to a conditional request, which forbids a 304.
        const again = await rawRequest(server.url, { path, headers: { 'If-None-Match': etag! } });
        expect(again.status, `${path} revalidated`).to.equal(304);
      }
      const html = await (await server.request('/admin')).text();
      expect(html).not.to.match(/<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
      expect(html).not.to.contain('style=');
    });

    it('answers every other asset path with a JSON 404, the file system out of reach', async function () {
      for (const path of [
        '/admin/assets/nope.js',
        '/admin/assets/../../package.json',
        '/admin/assets/%2e%2e/%2e%2e/package.json',
        '/admin/assets/..%2f..%2fpackage.json',
        '/admin/assets/',
        '/admin/assets/build.ts',
        '/admin/assets/app/main.ts',
      ]) {
        // Raw HTTP: the path goes out byte for byte (fetch would resolve the dot segments itself).
        const response = await rawRequest(server.url, { path });
        const text = response.text;
        expect(response.status, path).to.equal(404);
        expect(JSON.parse(text).error, path).to.equal('not_found');
        expect(text, path).not.to.contain('"dependencies"');
      }
      const viaAssets = await rawRequest(server.url, { path: '/admin/assets/../api/clients' });
      expect(viaAssets.status, "an Admin API spelling under /admin/assets is still the gate's: key first").to.equal(
        401,
      );
      const posted = await server.request('/admin', { method: 'POST' });
      expect(posted.status).to.equal(405);
    });
  });

  describe('its browser code', function () {
    // The server's tsc project leaves it out (DOM types clash with Node's), so the suite checks it here.
    it('typechecks against the DOM types (tsc -p src/admin/console/app)', async function () {
      // npm test (scripts/test.sh) has run this very tsc before mocha: once is enough (it takes 10 s and more).
      if (process.env.ARBITER_CONSOLE_TYPECHECKED === '1') this.skip();
      const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
      const { stdout, stderr } = await promisify(execFile)(process.execPath, [
        tsc,
        '--noEmit',
        '-p',
        'src/admin/console/app',
      ]).catch((error: { stdout: string; stderr: string }) => error);
      expect(`${stdout}${stderr}`).to.equal('');
    });
  });

  describe('the journey', function () {
    it('refuses a wrong key, then signs in with the keyboard alone (Tab to the field, Enter submits)', async function () {
      await page.goto(`${server.url}/admin`);
      await page.getByRole('heading', { name: 'Sign in' }).waitFor();
      await screenshot('sign-in');
      await expectAccessible('sign-in page');

      await page.evaluate('document.activeElement && document.activeElement.blur()');
      await tabUntil((focus) => focus.id === 'admin-key');
      await page.keyboard.type('not-the-key');
      await page.keyboard.press('Enter');
      await page.getByText('That key is not valid.').waitFor();

      await page.keyboard.press('Control+A');
      await page.keyboard.type(ADMIN_KEY);
      await page.keyboard.press('Enter');
      await page.getByRole('navigation', { name: 'Main' }).waitFor();
      expect(await page.evaluate('sessionStorage.getItem("arbiter.console.adminKey")')).to.equal(ADMIN_KEY);
      expect(await page.evaluate('JSON.stringify(localStorage)')).not.to.contain(ADMIN_KEY);
    });

    it('reaches the main navigation with Tab and follows a link with Enter', async function () {
      await page.evaluate('document.activeElement && document.activeElement.blur()');
      const link = await tabUntil((focus) => focus.inNavigation && focus.text === 'Clients');
      expect(link.tag).to.equal('A');
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { level: 2, name: 'Clients' }).waitFor();
    });

    it("adds an identity provider, showing the API's validation error next to the field first", async function () {
      await openPage('Identity providers');
      await page.getByRole('button', { name: 'New identity provider' }).click();
      await field('issuer').fill('ftp://idp.example.test');
      await field('name').fill('Example IdP');
      await field('clientId').fill('arbiter-at-example');
      await field('clientSecret').fill('upstream-secret-value');
      await form().getByRole('button', { name: 'Save' }).click();
      await errorOf('issuer').waitFor();
      expect(await errorOf('issuer').textContent()).to.contain('issuer must match');
      expect(await field('issuer').getAttribute('aria-invalid')).to.equal('true');
      await screenshot('identity-provider-error');

      await field('issuer').fill('https://idp.example.test');
      await field('clientSecret').fill('upstream-secret-value');
      await form().getByRole('button', { name: 'Save' }).click();
      await page.getByRole('row', { name: /https:\/\/idp\.example\.test/ }).waitFor();
      await screenshot('identity-provider-added');

      const stored = (await server.admin('GET', '/identity-providers')).body as any[];
      const idp = stored.find((record) => record.issuer === 'https://idp.example.test');
      expect(idp).to.include({ name: 'Example IdP', clientId: 'arbiter-at-example', enabled: true });
      expect(JSON.stringify(idp)).not.to.contain('upstream-secret-value');
    });

    // Found 2026-11-30: the browser hashed any typed secret, and BCrypt cut one over 72 bytes without
    // a word (any secret sharing its first 72 bytes then worked), where the Admin API refuses it.
    it('refuses a typed secret longer than BCrypt reads, naming the field, and sends nothing', async function () {
      await openPage('Clients');
      await page.getByRole('button', { name: 'New client' }).click();
      await field('clientId').fill('console-long-secret');
      await field('clientType').selectOption('confidential');
      await form().getByLabel('Type one').check();
      await field('clientSecret').fill('s'.repeat(73));
      await form().getByRole('button', { name: 'Save' }).click();
      await form()
        .getByText(/longer than 72 bytes/)
        .waitFor();
      expect((await server.admin('GET', '/clients/console-long-secret')).status).to.equal(404);
      await form().getByRole('button', { name: 'Cancel' }).click();
    });

    it('adds a confidential client whose secret the browser hashes: the secret then works at /token', async function () {
      await openPage('Clients');
      await page.getByRole('button', { name: 'New client' }).click();
      await field('clientId').fill('console-app');
      await field('clientType').selectOption('confidential');
      await form().getByLabel('Type one').check();
      await field('clientSecret').fill('console-secret-value');
      await field('scopes').fill('read\nprofile');
      await form().getByRole('button', { name: 'Save' }).click();
      await page.getByRole('row', { name: /console-app/ }).waitFor();
      await screenshot('client-added');

      const granted = await clientCredentials(server, 'console-app', 'console-secret-value', { scope: 'read' });
      expect(granted.status, JSON.stringify(granted.body)).to.equal(200);
      expect(granted.body.scope).to.equal('read');
      expect(requested.join('\n')).not.to.contain('console-secret-value');
    });

    it('edits a record in a form filled with what is stored, and deletes it after a confirmation', async function () {
      await openPage('Subjects');
      await page.getByRole('button', { name: 'New subject' }).click();
      await field('subjectId').fill('sam');
      await field('name').fill('Sam');
      await form().getByRole('button', { name: 'Save' }).click();
      const row = page.getByRole('row', { name: /\bsam\b/ });
      await row.waitFor();

      await row.getByRole('button', { name: /^Edit/ }).click();
      expect(await field('subjectId').inputValue()).to.equal('sam');
      expect(await field('name').inputValue()).to.equal('Sam');
      await field('name').fill('Samantha');
      await form().getByRole('button', { name: 'Save' }).click();
      await page.getByRole('row', { name: /Samantha/ }).waitFor();
      const stored = ((await server.admin('GET', '/subjects')).body as any[]).find(
        (subject) => subject.subjectId === 'sam',
      );
      expect(stored).to.include({ name: 'Samantha' });

      const remove = page.getByRole('row', { name: /Samantha/ }).getByRole('button', { name: /^Delete/ });
      await remove.click();
      expect(await remove.textContent()).to.equal('Confirm delete');
      expect(
        (await server.admin('GET', `/subjects/${stored.id}`)).status,
        'nothing deleted before the confirmation',
      ).to.equal(200);
      await remove.click();
      await page.getByText(`Deleted ${stored.id}.`).waitFor();
      expect((await server.admin('GET', `/subjects/${stored.id}`)).status).to.equal(404);
    });

    it("switches tenant: lists and writes are the chosen tenant's, and a reload keeps the session", async function () {
      expect((await server.admin('POST', '/tenants', { id: 'tenant-console' })).status).to.equal(201);
      // Another page: the banner asks for the tenants again.
      await openPage('Clients');
      await page.getByLabel('Tenant', { exact: true }).selectOption('tenant-console');
      await page.getByRole('button', { name: 'Switch' }).click();
      await page.getByText('Showing tenant tenant-console').waitFor();
      await openPage('Clients');
      await page.getByText('No clients in this tenant yet.').waitFor();
      await page.getByRole('button', { name: 'New client' }).click();
      await field('clientId').fill('tenant-app');
      await field('clientType').selectOption('public');
      await form().getByRole('button', { name: 'Save' }).click();
      await page.getByRole('row', { name: /tenant-app/ }).waitFor();
      expect(
        ((await server.admin('GET', '/clients?tenantId=tenant-console')).body as any[]).map(
          (client) => client.clientId,
        ),
      ).to.deep.equal(['tenant-app']);
      expect(((await server.admin('GET', '/clients')).body as any[]).map((client) => client.clientId)).to.deep.equal([
        'console-app',
      ]);

      await page.reload();
      await page.getByRole('row', { name: /tenant-app/ }).waitFor();
      await page.getByLabel('Tenant', { exact: true }).selectOption('');
      await page.getByRole('button', { name: 'Switch' }).click();
      await page.getByText('Showing the default tenant').waitFor();
      await page.getByRole('row', { name: /console-app/ }).waitFor();
    });

    it("shows the engine's parse error of a broken Rego rule before and on saving, and stores nothing", async function () {
      await openPage('Policy rules');
      await page.getByRole('button', { name: 'New policy rule' }).click();
      await field('kind').selectOption('rego');
      await field('path').fill('arbiter/console_demo.rego');
      await field('content').fill('package arbiter.console_demo\n\nimport rego.v1\n\nallow if {\n');

      await form().getByRole('button', { name: 'Check with the engine' }).click();
      await errorOf('content').waitFor();
      expect(await errorOf('content').textContent()).to.contain('rego_parse_error');
      await form().getByText('Not valid: see Content.').waitFor();
      await screenshot('rego-check-error');

      await form().getByRole('button', { name: 'Save' }).click();
      await page.getByText('Not saved: see Content.').waitFor();
      expect(await errorOf('content').textContent()).to.contain('rego_parse_error');
      const rules = (await server.admin('GET', '/policy-rules')).body as any[];
      expect(rules.map((rule) => rule.path)).not.to.include('arbiter/console_demo.rego');
    });

    it('saves the fixed rule and shows the bundle revision OPA then serves', async function () {
      const before = (await (await server.request('/healthz')).json()) as { policyRevision: { store: string } };
      await field('content').fill('package arbiter.console_demo\n\nimport rego.v1\n\nallow := true\n');
      await form().getByRole('button', { name: 'Check with the engine' }).click();
      await form().getByText('Valid: the server would accept this.').waitFor();
      await form().getByRole('button', { name: 'Save' }).click();

      const served = page.getByText(/OPA now serves bundle revision (\S+)\./);
      await served.waitFor({ timeout: 30_000 });
      const revision = /revision (\S+)\./.exec((await served.textContent())!)![1];
      const health = (await (await server.request('/healthz')).json()) as { policyRevision: unknown };
      expect(health.policyRevision).to.deep.include({ store: revision, opa: revision });
      expect(revision).not.to.equal(before.policyRevision.store);
      await page.getByRole('row', { name: /arbiter\/console_demo\.rego/ }).waitFor();
      await screenshot('rego-saved-revision');
    });

    it('checks policy data as JSON in the browser before sending, then saves it and shows the served revision', async function () {
      await openPage('Policy data');
      await page.getByRole('button', { name: 'New policy data' }).click();
      await field('dataKey').fill('console_note');
      await field('payload').fill('{"note": "from the console",}');
      const posts: string[] = [];
      const onRequest = (request: import('playwright-core').Request) =>
        request.method() === 'POST' && posts.push(request.url());
      page.on('request', onRequest);
      await form().getByRole('button', { name: 'Save' }).click();
      await errorOf('payload').waitFor();
      page.off('request', onRequest);
      expect(await errorOf('payload').textContent()).to.match(/^Payload is not valid JSON: /);
      expect(posts, 'nothing was sent').to.deep.equal([]);

      await field('payload').fill('{"note": "from the console"}');
      await form().getByRole('button', { name: 'Save' }).click();
      await page.getByText(/OPA now serves bundle revision/).waitFor({ timeout: 30_000 });
      const stored = ((await server.admin('GET', '/policy-data')).body as any[]).find(
        (entry) => entry.dataKey === 'console_note',
      );
      expect(stored).to.include({ payload: '{"note": "from the console"}', inBundle: true });
    });

    it('finds the audit entry of a refused /token request and explains why it was refused', async function () {
      const refused = await clientCredentials(server, 'console-app', 'console-secret-value', { scope: 'admin' });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
      expect(refused.body.error).to.equal('invalid_scope');

      await openPage('Audit log');
      await page.getByLabel('Endpoint').fill('/token');
      await page.getByLabel('Client ID').fill('console-app');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.getByText('2 entries.', { exact: true }).waitFor();
      const deniedRow = page.locator('tbody tr', { has: page.locator('td.outcome.deny') });
      expect(await deniedRow.count()).to.equal(1);
      await screenshot('audit-filtered');

      await deniedRow.getByRole('button', { name: /Why\?/ }).click();
      const why = page.locator('section.why');
      await why.getByRole('heading', { name: /Why\? Entry/ }).waitFor();
      await why.locator('.replay').waitFor();
      const explanation = (await why.textContent()) ?? '';
      expect(explanation).to.contain('Then: refused: invalid_scope');
      expect(explanation).to.contain('Rego (OPA)');
      await screenshot('audit-why');
      await expectAccessible('audit log with an explanation');
    });

    it('opens the refused input in the playground, decides it there, and refuses input that is not JSON', async function () {
      await page.getByRole('button', { name: 'Open this input in the playground' }).click();
      await page.getByRole('heading', { level: 2, name: 'Decision playground' }).waitFor();
      expect(await page.getByLabel('Decision point').inputValue()).to.equal('token');
      const input = JSON.parse(await page.getByLabel('Input (JSON)').inputValue());
      expect(input.client.client_id).to.equal('console-app');

      await page.getByRole('button', { name: 'Decide' }).click();
      const answer = page.locator('section.answer .explanation');
      await answer.waitFor();
      const text = (await answer.textContent()) ?? '';
      expect(text).to.contain('Decision at token: refused: invalid_scope');
      expect(text).to.contain('Rego (OPA)').and.contain('data.arbiter.token.decision').and.contain('Cedar');
      await screenshot('playground');

      // Opened from the navigation, the playground offers a sample input the engines accept.
      await openPage('Identity providers');
      await openPage('Decision playground');
      await page.getByRole('button', { name: 'Decide' }).click();
      await page
        .locator('section.answer .explanation')
        .getByText(/^Decision at token: allowed \(scopes: read\)/)
        .waitFor();

      await page.getByLabel('Input (JSON)').fill('{ not json');
      await page.getByRole('button', { name: 'Decide' }).click();
      await page.getByText(/Input is not valid JSON/).waitFor();
      expect(await page.getByLabel('Input (JSON)').getAttribute('aria-invalid')).to.equal('true');
    });

    it('pages through the audit log', async function () {
      const total = (await server.admin('GET', '/audit-logs?size=1')).body.totalElements as number;
      expect(total, 'the journey made more than one page of entries').to.be.greaterThan(21);
      await openPage('Audit log');
      await page.getByLabel("Include the console's own reads").check();
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.getByText(/Audit entries, page 1 of \d+/).waitFor();
      await page.getByRole('button', { name: 'Next page' }).click();
      await page.getByText(/Audit entries, page 2 of \d+/).waitFor();
      expect(await page.locator('main tbody tr').count()).to.be.within(1, 20);
      await page.getByRole('button', { name: 'Previous page' }).click();
      await page.getByText(/Audit entries, page 1 of \d+/).waitFor();
      expect(await page.locator('main tbody tr').count()).to.equal(20);
    });

    it('shows an aggregated entry (refusals of an unauthenticated address, counted) with its statuses and count', async function () {
      const now = new Date().toISOString();
      await server.store.collection(AUDIT_LOG_COLLECTION, DEFAULT_TENANT).insert({
        id: 900_000_001,
        createdAt: now,
        endpoint: '/userinfo',
        method: 'GET',
        requestSummary: {
          kind: 'aggregated',
          count: 25,
          address: '127.0.0.41',
          window: { start: now, end: now },
          endpoints: { '/userinfo': 25 },
          statuses: { 401: 25 },
        },
        policyInput: null,
        policyDecision: null,
        outcome: 'deny',
        tenantId: null,
        clientId: null,
        subjectId: null,
        ip: '127.0.0.41',
        userAgent: null,
        requestId: null,
      });
      await openPage('Audit log');
      await page.getByLabel('Endpoint').fill('/userinfo');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.locator('tbody tr[data-entry="900000001"]').getByText('401 ×25 (aggregated)').waitFor();
    });
  });

  describe('every page', function () {
    it('has no serious or critical axe violation, with its form open where it has one', async function () {
      const titles = await page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents();
      expect(titles).to.have.length(16);
      for (const title of titles) {
        await openPage(title);
        // A collection's list or the audit log arrives after the heading: check the page with it.
        if (await page.locator('main .list-area').count()) await page.locator('main .list-area > *').first().waitFor();
        await expectAccessible(title);
        const create = page.getByRole('button', { name: /^New / });
        if (await create.count()) {
          await create.click();
          await form().waitFor();
          await expectAccessible(`${title}, form open`);
        }
      }
    });

    it('never put the key in a URL or a log line, and the CSP was never violated', async function () {
      expect(requested.length).to.be.greaterThan(20);
      for (const url of requested)
        expect(url).not.to.contain(ADMIN_KEY).and.not.to.contain(encodeURIComponent(ADMIN_KEY));
      expect(logLines.length, 'the server logged at info level').to.be.greaterThan(0);
      for (const line of logLines) expect(line).not.to.contain(ADMIN_KEY);
      expect(violations).to.deep.equal([]);
    });

    it('would have noticed a CSP violation (an inline script is refused and reported)', async function () {
      await page.evaluate(
        `(() => { const script = document.createElement('script'); script.textContent = 'window.inlineRan = true'; document.body.append(script); })()`,
      );
      const deadline = Date.now() + 5_000;
      while (violations.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(violations.join('\n')).to.contain('script-src');
      expect(await page.evaluate('window.inlineRan === true')).to.equal(false);
    });
  });

  describe('a key the API stops accepting', function () {
    it('sends the operator back to the sign-in page and forgets the key', async function () {
      await page.evaluate('sessionStorage.setItem("arbiter.console.adminKey", "a-key-that-was-rotated")');
      await page
        .getByRole('navigation', { name: 'Main' })
        .getByRole('link', { name: 'Resources', exact: true })
        .click();
      await page.getByText('The Admin API key was refused: sign in again.').waitFor();
      await page.getByRole('heading', { name: 'Sign in' }).waitFor();
      expect(await page.evaluate('sessionStorage.getItem("arbiter.console.adminKey")')).to.equal(null);
    });
  });
});
