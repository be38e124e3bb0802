import { expect } from 'chai';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { signedInConsole, expectNoAxeViolations, openConsolePage } from '../support/browser.js';
import { clientCredentials, confidentialClient, policyInForce } from '../support/oauth.js';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';

const ARTIFACTS = join('test-artifacts', 'console-policy-safety');

const rego = (path: string, content: string) => ({ version: null, kind: 'rego', path, content });

/**
 * The console's side of safe policy changes, in Chromium: a rule whose bundle cannot decide is
 * refused with OPA's message and file:line next to the content; a rule's versions are compared
 * and rolled back from its History; a live policy that cannot decide is announced above every
 * page with the point and OPA's error. Every view passes axe, and the CSP is never violated.
 */
describe('Console: safe policy changes, in Chromium', function () {
  let server: TestServer;
  let context: BrowserContext;
  let page: Page;
  let violations: string[];

  before(async function () {
    mkdirSync(ARTIFACTS, { recursive: true });
    // Its own server: the tests change the shared bundle and make /healthz degraded.
    server = await readyServer();
    ({ context, page, violations } = await signedInConsole(server.url, ADMIN_KEY));
  });

  after(async function () {
    await context?.close();
    await server?.close();
  });

  const form = () => page.locator('form.record-form');
  const field = (name: string) => form().locator(`[name="${name}"]`);
  const errorOf = (name: string) => form().locator(`.field:has([name="${name}"]) .field-error`);

  const openPage = (title: string) => openConsolePage(page, title);

  const expectAccessible = (what: string) => expectNoAxeViolations(page, what);

  it("shows OPA's evaluation error and the rule's file:line for a rule the bundle cannot decide with, and stores nothing", async function () {
    await openPage('Policy rules');
    await page.getByRole('button', { name: 'New policy rule' }).click();
    await field('kind').selectOption('rego');
    await field('path').fill('arbiter/token2.rego');
    await field('content').fill('package arbiter.token\n\ndecision := {"allow": true}\n');
    await form().getByRole('button', { name: 'Check with the engine' }).click();
    await errorOf('content').waitFor();
    expect(await errorOf('content').textContent())
      .to.contain('eval_conflict_error: complete rules must not produce multiple outputs')
      .and.contain('(arbiter/token2.rego:3)');
    await form().getByRole('button', { name: 'Save' }).click();
    await page.getByText('Not saved: see Content.').waitFor();
    await page.screenshot({ path: join(ARTIFACTS, '01-conflict-refused.png'), fullPage: true });
    const rules = (await server.admin('GET', '/policy-rules')).body as any[];
    expect(rules.map((rule) => rule.path)).not.to.include('arbiter/token2.rego');
  });

  it("lists a rule's versions, compares one with the current rule and rolls back to it", async function () {
    const path = 'arbiter/console_history.rego';
    const created = await server.admin(
      'POST',
      '/policy-rules',
      rego(path, 'package arbiter.console_history\n\nanswer := 1\n'),
    );
    const { id } = created.body;
    await server.admin('PUT', `/policy-rules/${id}`, rego(path, 'package arbiter.console_history\n\nanswer := 2\n'));

    await openPage('Identity providers');
    await openPage('Policy rules');
    await page.getByRole('button', { name: `History of ${id}` }).click();
    const history = page.locator('section.history');
    await history.getByRole('heading', { name: `History of ${path}` }).waitFor();
    await history.locator('tr[data-version="1"]').waitFor();
    expect(await history.locator('tbody tr').allTextContents()).to.have.length(2);

    await history.getByRole('button', { name: 'Compare version 1 with the current one' }).click();
    const diff = history.locator('pre.diff');
    await diff.waitFor();
    expect(await diff.locator('.removed').allTextContents()).to.deep.equal(['-answer := 1\n']);
    expect(await diff.locator('.added').allTextContents()).to.deep.equal(['+answer := 2\n']);
    await expectAccessible('a rule history with a comparison');
    await page.screenshot({ path: join(ARTIFACTS, '02-history-diff.png'), fullPage: true });

    const rollBack = history.getByRole('button', { name: 'Roll back to version 1' });
    await rollBack.click();
    expect(await rollBack.textContent()).to.equal('Confirm roll back');
    expect(
      (await server.admin('GET', `/policy-rules/${id}`)).body.content,
      'nothing before the confirmation',
    ).to.contain('answer := 2');
    await rollBack.click();
    await history.getByText('Rolled back to version 1.').waitFor();
    await page.getByText(/OPA now serves bundle revision/).waitFor({ timeout: 30_000 });
    await history.locator('tr[data-version="3"]').getByText('rolled back to version 1').waitFor();
    expect((await server.admin('GET', `/policy-rules/${id}`)).body.content).to.contain('answer := 1');
  });

  it("announces a live policy that cannot decide a point, with OPA's error, above every page until it is fixed", async function () {
    const rule = await server.admin(
      'POST',
      '/policy-rules',
      rego(
        'arbiter/late.rego',
        'package arbiter.token\n\ndecision := {"allow": false} if input.client.client_id == "console-late"\n',
      ),
    );
    expect(rule.status, JSON.stringify(rule.body)).to.equal(201);
    await policyInForce(server);
    const secret = await confidentialClient(server, 'console-late', { scopes: ['read'] });
    expect((await clientCredentials(server, 'console-late', secret, { scope: 'read' })).status).to.equal(503);

    await page.reload();
    const notice = page.getByRole('region', { name: 'Server health' });
    await notice.getByText('The policy in force cannot decide token').waitFor();
    expect(await notice.textContent())
      .to.contain('eval_conflict_error: complete rules must not produce multiple outputs')
      .and.match(/\(arbiter\/[\w/]+\.rego:\d+\)/)
      .and.contain('1 of 1 decisions failed');
    await expectAccessible('a page with the policy health notice');
    await page.screenshot({ path: join(ARTIFACTS, '03-degraded-notice.png'), fullPage: true });

    expect((await server.admin('DELETE', `/policy-rules/${rule.body.id}`)).status).to.equal(204);
    await policyInForce(server);
    await page.reload();
    await page.getByRole('heading', { level: 2 }).waitFor();
    await page.locator('section.health[data-checked="true"]').waitFor({ state: 'attached' });
    expect(await page.locator('section.health').innerHTML()).to.equal('');
    expect(violations).to.deep.equal([]);
  });
});
