import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { openArbiterStore } from '../../src/collections.js';
import { projectPath } from '../../src/config/index.js';
import { SCHEMA_VERSION } from '../../src/migrations.js';
import { DEFAULT_TENANT, SCHEMA_COLLECTION, schemaVersion } from '../../src/store/index.js';
import { clientCredentials } from '../support/oauth.js';
import { readyServer, startTestServer } from '../support/server.js';

/** `arbiter <command>` as an operator runs it, against a store that servers then use. */
function arbiter(storeUrl: string, ...args: string[]) {
  const run = spawnSync(process.execPath, ['--import', 'tsx', projectPath('src', 'cli', 'main.ts'), ...args], {
    env: { PATH: process.env.PATH ?? '', STORE_URL: storeUrl },
    encoding: 'utf8',
  });
  return {
    status: run.status,
    stderr: run.stderr,
    json: () => JSON.parse(run.stdout) as Record<string, unknown>,
  };
}

describe('The arbiter command line, schema versions, backup and restore', function () {
  let dir: string;
  const store = (name: string) => `sqlite:${join(dir, name)}`;

  beforeEach(function () {
    dir = mkdtempSync(join(tmpdir(), 'arbiter-cli-'));
  });
  afterEach(function () {
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates a client whose secret, shown once, works at /token; refuses a duplicate and bad values through the Admin API checks', async function () {
    const created = arbiter(store('a.db'), 'create-client', 'svc', '--scopes', 'read');
    expect(created.status, created.stderr).to.equal(0);
    const { clientId, clientSecret } = created.json() as { clientId: string; clientSecret: string };
    expect(clientId).to.equal('svc');
    const server = await readyServer({ STORE_URL: store('a.db') });
    try {
      const token = await clientCredentials(server, 'svc', clientSecret, { scope: 'read' });
      expect(token.status, JSON.stringify(token.body)).to.equal(200);
      const stored = (await server.admin('GET', '/clients/svc')).body;
      expect(JSON.stringify(stored), 'the secret is not stored in clear').to.not.contain(clientSecret);
    } finally {
      await server.close();
    }
    const again = arbiter(store('a.db'), 'create-client', 'svc');
    expect(again.status).to.equal(1);
    expect(again.stderr).to.match(/already exists/);
    const bad = arbiter(store('a.db'), 'create-client', 'other', '--grant-types', 'password');
    expect(bad.status).to.equal(1);
    expect(bad.stderr).to.match(/grantTypes\.0 must be equal to one of the allowed values/);
    expect(arbiter(store('a.db'), 'no-such-command').status, 'a wrong command line').to.equal(2);
    expect(arbiter(store('a.db'), 'create-client').status).to.equal(2);
    expect(arbiter(store('a.db'), 'backup').status).to.equal(2);
  });

  it('hashes a secret the Admin API takes', function () {
    const run = arbiter(store('a.db'), 'hash-secret', 'correct horse');
    expect(run.status, run.stderr).to.equal(0);
    expect(run.json().hash).to.match(/^\$2[aby]\$10\$/);
    expect(run.json(), 'a given secret is not echoed').to.not.have.property('secret');
    expect(arbiter(store('a.db'), 'hash-secret').json())
      .to.have.property('secret')
      .that.is.a('string');
  });

  it('backs up a store in use and restores it into another file that a server then serves, clients included', async function () {
    const created = arbiter(store('live.db'), 'create-client', 'kept-svc', '--scopes', 'read');
    const { clientSecret } = created.json() as { clientSecret: string };
    const live = await readyServer({ STORE_URL: store('live.db') });
    try {
      const backup = arbiter(store('live.db'), 'backup', join(dir, 'copy.db'));
      expect(backup.status, backup.stderr).to.equal(0);
      expect(backup.json()).to.include({ schemaVersion: SCHEMA_VERSION });
    } finally {
      await live.close();
    }
    const restored = arbiter(store('restored.db'), 'restore', join(dir, 'copy.db'));
    expect(restored.status, restored.stderr).to.equal(0);
    const server = await readyServer({ STORE_URL: store('restored.db') });
    try {
      expect((await clientCredentials(server, 'kept-svc', clientSecret, { scope: 'read' })).status).to.equal(200);
    } finally {
      await server.close();
    }
    const notAStore = arbiter(store('x.db'), 'restore', projectPath('package.json'));
    expect(notAStore.status).to.equal(1);
    expect(arbiter(store('x.db'), 'restore', join(dir, 'missing.db')).status).to.equal(1);
  });

  it('records the schema version at start, and refuses a store of a newer release (server and command line)', async function () {
    const server = await readyServer({ STORE_URL: store('v.db') });
    expect(await schemaVersion(server.store)).to.equal(SCHEMA_VERSION);
    await server.close();
    expect(arbiter(store('v.db'), 'schema-version').json()).to.deep.equal({
      store: SCHEMA_VERSION,
      release: SCHEMA_VERSION,
    });
    const opened = await openArbiterStore(store('v.db'));
    await opened.collection(SCHEMA_COLLECTION, DEFAULT_TENANT).update('version', { version: SCHEMA_VERSION + 1 });
    await opened.close();
    const migrate = arbiter(store('v.db'), 'migrate');
    expect(migrate.status).to.equal(1);
    expect(migrate.stderr).to.match(/newer than this Arbiter's/);
    let refused: unknown;
    await startTestServer({ STORE_URL: store('v.db') }).then(
      (started) => started.close(),
      (error: unknown) => (refused = error),
    );
    expect(String(refused)).to.match(/schema version \d+, newer than this Arbiter's/);
  });
});
