import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Koa from 'koa';
import { adminConsole } from '../../../src/admin/console/serve.js';
import { jsonErrors } from '../../../src/http/errors.js';
import { createLogger } from '../../../src/log/index.js';

/**
 * The console is served from the folder `npm run build` wrote (dist/console/), never compiled
 * by the server: here a folder of the test's own, behind the server's error mapping.
 */
describe('unit: the console is served as built (admin/console/serve)', function () {
  let root: string;
  let dir: string;
  let server: Server;
  let origin: string;
  const logLines: string[] = [];

  before(async function () {
    root = mkdtempSync(join(tmpdir(), 'arbiter-console-'));
    dir = join(root, 'console');
    const app = new Koa();
    app.use(jsonErrors(createLogger('info', { write: (line: string) => void logLines.push(line) })));
    app.use(adminConsole(dir));
    await new Promise<void>((resolve) => (server = app.listen(0, '127.0.0.1', resolve)));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async function () {
    await new Promise((resolve) => server?.close(resolve));
    rmSync(root, { recursive: true, force: true });
  });

  it('answers 503 naming `npm run build` while nothing is built, then serves the files once they are', async function () {
    const missing = await fetch(`${origin}/admin`);
    expect(missing.status).to.equal(503);
    expect(((await missing.json()) as { error_description: string }).error_description).to.match(
      /not built .*npm run build/,
    );
    expect(logLines.join('')).to.match(/console unavailable: the console is not built/);

    mkdirSync(dir);
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>built</title>');
    writeFileSync(join(dir, 'console.js'), 'export const built = true;');
    const page = await fetch(`${origin}/admin`);
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.equal('text/html; charset=utf-8');
    expect(await page.text()).to.equal('<!doctype html><title>built</title>');
    const bundle = await fetch(`${origin}/admin/assets/console.js`);
    expect(bundle.headers.get('content-type')).to.equal('text/javascript; charset=utf-8');
    expect(await bundle.text()).to.equal('export const built = true;');
    expect((await fetch(`${origin}/admin/assets/other.js`)).status).to.equal(404);
  });
});
