import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ADMIN_API_KEYS_COLLECTION } from '../../src/admin/collections.js';
import { openArbiterStore } from '../../src/collections.js';
import { projectPath } from '../../src/config/index.js';
import { SCHEMA_VERSION } from '../../src/migrations.js';
import { DEFAULT_TENANT, SCHEMA_COLLECTION, schemaVersion, storageDigest } from '../../src/store/index.js';
import { sharedPostgresTestServer } from '../store/postgres-server.js';
import { clientCredentials } from '../support/oauth.js';
import { readyServer, startTestServer } from '../support/server.js';
import { entryPoint } from '../support/entry-point.js';
import { verify as bcryptVerify } from '@node-rs/bcrypt';
import { openSealedFile, sealFile } from '../../src/store/sealed-file.js';

/** `arbiter <command>` as an operator runs it, against a store that servers then use. */
function arbiter(storeUrl: string, ...args: string[]) {
  return arbiterWith({}, storeUrl, ...args);
}

/** `arbiter <command>` with more of the environment (SERVICE_SECRETS_KEY, …). */
function arbiterWith(env: Record<string, string>, storeUrl: string, ...args: string[]) {
  return arbiterWithInput('', env, storeUrl, ...args);
}

/** `arbiter <command>` given `input` on its standard input. */
function arbiterWithInput(input: string, env: Record<string, string>, storeUrl: string, ...args: string[]) {
  const run = spawnSync(process.execPath, [...entryPoint('cli/main'), ...args], {
    env: { PATH: process.env.PATH ?? '', STORE_URL: storeUrl, ...env },
    encoding: 'utf8',
    input,
  });
  return {
    status: run.status,
    stderr: run.stderr,
    json: () => JSON.parse(run.stdout) as Record<string, unknown>,
  };
}

/** The key backups are sealed with, as SERVICE_SECRETS_KEY would be. */
const SECRETS_KEY = randomBytes(32).toString('base64url');
const WITH_KEY = { SERVICE_SECRETS_KEY: SECRETS_KEY };

/** The permission bits of a file. */
const modeOf = (file: string) => statSync(file).mode & 0o777;

describe('The arbiter command line, schema versions, backup and restore', function () {
  // Each command is a process of its own (tsx compiles the CLI at start): seconds each on a busy machine.
  this.timeout(180_000);
  let dir: string;
  const store = (name: string) => `sqlite:${join(dir, name)}`;

  beforeEach(function () {
    dir = mkdtempSync(join(tmpdir(), 'arbiter-cli-'));
  });
  /** Scratch and partial files the backup and restore commands make and must remove. */
  const readdirScratch = () => readdirSync(dir).filter((name) => /scratch|partial/.test(name));
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

  it('hashes a secret the Admin API takes, given on standard input, never as an argument (every local user reads a command line)', async function () {
    const run = arbiterWithInput('correct horse\n', {}, store('a.db'), 'hash-secret', '-');
    expect(run.status, run.stderr).to.equal(0);
    expect(run.json().hash).to.match(/^\$2[aby]\$10\$/);
    expect(
      await bcryptVerify('correct horse', run.json().hash as string),
      'the hash of the line, not its line end',
    ).to.equal(true);
    expect(run.json(), 'a given secret is not echoed').to.not.have.property('secret');
    const refused = arbiter(store('a.db'), 'hash-secret', 'correct horse');
    expect(refused.status).to.equal(2);
    expect(refused.stderr).to.match(/standard input/);
    expect(arbiter(store('a.db'), 'hash-secret').json())
      .to.have.property('secret')
      .that.is.a('string');
  });

  it('backs up a store in use and restores it into another file that a server then serves, clients included', async function () {
    const created = arbiter(store('live.db'), 'create-client', 'kept-svc', '--scopes', 'read');
    const { clientSecret } = created.json() as { clientSecret: string };
    const live = await readyServer({ STORE_URL: store('live.db') });
    try {
      const backup = arbiterWith(WITH_KEY, store('live.db'), 'backup', join(dir, 'copy.db'));
      expect(backup.status, backup.stderr).to.equal(0);
      expect(backup.json()).to.include({ schemaVersion: SCHEMA_VERSION, sealed: true });
      // Issue 37.7: a restore onto the store a running server holds is refused, and changes nothing.
      expect(
        (await live.admin('POST', '/clients', { clientId: 'after-backup', clientType: 'public' })).status,
      ).to.equal(201);
      const onLive = arbiterWith(WITH_KEY, store('live.db'), 'restore', join(dir, 'copy.db'));
      expect(onLive.status, onLive.stderr).to.equal(1);
      expect(onLive.stderr).to.match(/is in use by a running server or another process: stop it/);
      expect((await live.admin('GET', '/clients/after-backup')).status, 'the live data intact').to.equal(200);
      expect(readdirScratch(), 'no scratch file left').to.deep.equal([]);
    } finally {
      await live.close();
    }
    const restored = arbiterWith(WITH_KEY, store('restored.db'), 'restore', join(dir, 'copy.db'));
    expect(restored.status, restored.stderr).to.equal(0);
    const server = await readyServer({ STORE_URL: store('restored.db') });
    try {
      expect((await clientCredentials(server, 'kept-svc', clientSecret, { scope: 'read' })).status).to.equal(200);
    } finally {
      await server.close();
    }
    const notAStore = arbiterWith(WITH_KEY, store('x.db'), 'restore', projectPath('package.json'));
    expect(notAStore.status).to.equal(1);
    expect(arbiterWith(WITH_KEY, store('x.db'), 'restore', join(dir, 'missing.db')).status).to.equal(1);
  });

  it('migrates, backs up a PostgreSQL store in use and restores it into another schema that a server then serves', async function () {
    const postgres = await sharedPostgresTestServer();
    const [live, target] = [postgres.url(), postgres.url()];
    expect(arbiter(live, 'migrate').json()).to.include({ to: SCHEMA_VERSION });
    const created = arbiter(live, 'create-client', 'kept-pg-svc', '--scopes', 'read');
    const { clientSecret } = created.json() as { clientSecret: string };
    const running = await readyServer({ STORE_URL: live });
    try {
      const backup = arbiterWith(WITH_KEY, live, 'backup', join(dir, 'copy.pg'));
      expect(backup.status, backup.stderr).to.equal(0);
      expect(backup.json()).to.include({ schemaVersion: SCHEMA_VERSION, sealed: true });
      expect(modeOf(join(dir, 'copy.pg')).toString(8), 'the backup').to.equal('600');
      expect(readFileSync(join(dir, 'copy.pg')).includes('kept-pg-svc'), 'sealed: no record in clear').to.equal(false);
    } finally {
      await running.close();
    }
    // The target already holds a client of its own: a restore replaces the whole store.
    expect(arbiter(target, 'create-client', 'replaced-svc').status).to.equal(0);
    // The same backup as a newer release would have written it is refused, the target untouched.
    await openSealedFile(join(dir, 'copy.pg'), join(dir, 'copy-plain.pg'), [SECRETS_KEY]);
    const newer = readFileSync(join(dir, 'copy-plain.pg'), 'utf8').replace(
      /("id":"version","doc":\{[^}]*"version":)\d+/,
      `$1${SCHEMA_VERSION + 1}`,
    );
    expect(newer).to.contain(`"version":${SCHEMA_VERSION + 1}`);
    writeFileSync(join(dir, 'newer-plain.pg'), newer);
    await sealFile(join(dir, 'newer-plain.pg'), join(dir, 'newer.pg'), SECRETS_KEY);
    const refused = arbiterWith(WITH_KEY, target, 'restore', join(dir, 'newer.pg'));
    expect(refused.status, refused.stderr).to.equal(1);
    expect(refused.stderr).to.match(/newer than this Arbiter's .*the store is unchanged/);
    expect(arbiter(target, 'schema-version').json()).to.include({ store: SCHEMA_VERSION });
    const restored = arbiterWith(WITH_KEY, target, 'restore', join(dir, 'copy.pg'));
    expect(restored.status, restored.stderr).to.equal(0);
    const server = await readyServer({ STORE_URL: target });
    try {
      expect((await clientCredentials(server, 'kept-pg-svc', clientSecret, { scope: 'read' })).status).to.equal(200);
      expect((await server.admin('GET', '/clients/replaced-svc')).status).to.equal(404);
    } finally {
      await server.close();
    }
    expect(readdirScratch()).to.deep.equal([]);
    expect(arbiterWith(WITH_KEY, target, 'restore', projectPath('package.json')).status).to.equal(1);
  });

  // Issue 33, item 13: the store and its backups were world-readable, and restore took any SQLite file.
  it('keeps the database file, its -wal and -shm, backups and restored stores owner-only (0600)', async function () {
    const live = await readyServer({ STORE_URL: store('live.db') });
    try {
      for (const file of ['live.db', 'live.db-wal', 'live.db-shm'])
        expect(modeOf(join(dir, file)).toString(8), file).to.equal('600');
      const backup = arbiterWith(WITH_KEY, store('live.db'), 'backup', join(dir, 'copy.db'));
      expect(backup.status, backup.stderr).to.equal(0);
      expect(modeOf(join(dir, 'copy.db')).toString(8), 'the backup').to.equal('600');
    } finally {
      await live.close();
    }
    const restored = arbiterWith(WITH_KEY, store('restored.db'), 'restore', join(dir, 'copy.db'));
    expect(restored.status, restored.stderr).to.equal(0);
    expect(modeOf(join(dir, 'restored.db')).toString(8), 'the restored store').to.equal('600');
    // A store an older release made world-readable is narrowed when it is next opened.
    chmodSync(join(dir, 'restored.db'), 0o644);
    const reopened = await readyServer({ STORE_URL: store('restored.db') });
    try {
      for (const file of ['restored.db', 'restored.db-wal', 'restored.db-shm'])
        expect(modeOf(join(dir, file)).toString(8), file).to.equal('600');
    } finally {
      await reopened.close();
    }
    expect(readdirScratch(), 'no scratch file is left behind').to.deep.equal([]);
  });

  it('seals a backup: it holds no record in clear, and a store without SERVICE_SECRETS_KEY gets none', async function () {
    const created = arbiter(store('live.db'), 'create-client', 'sealed-svc');
    expect(created.status, created.stderr).to.equal(0);
    const unkeyed = arbiter(store('live.db'), 'backup', join(dir, 'unkeyed.db'));
    expect(unkeyed.status).to.equal(1);
    expect(unkeyed.stderr).to.match(/SERVICE_SECRETS_KEY is not set/);
    expect(existsSync(join(dir, 'unkeyed.db')), 'nothing is written').to.equal(false);
    expect(arbiterWith(WITH_KEY, store('live.db'), 'backup', join(dir, 'copy.db')).status).to.equal(0);
    const bytes = readFileSync(join(dir, 'copy.db'));
    expect(bytes.includes('SQLite format 3'), 'not a SQLite file in clear').to.equal(false);
    expect(bytes.includes('sealed-svc'), 'no record in clear').to.equal(false);
    // Restored with the key it was sealed with, also once that key has become the previous one.
    const rotated = {
      SERVICE_SECRETS_KEY: randomBytes(32).toString('base64url'),
      SERVICE_SECRETS_KEY_PREVIOUS: SECRETS_KEY,
    };
    // Onto a new machine too: the store's directory does not exist yet.
    const restored = arbiterWith(rotated, store('new-machine/restored.db'), 'restore', join(dir, 'copy.db'));
    expect(restored.status, restored.stderr).to.equal(0);
    expect(modeOf(join(dir, 'new-machine', 'restored.db')).toString(8)).to.equal('600');
  });

  it('refuses a backup that is not sealed, was changed, or was sealed with another key, leaving the store untouched', async function () {
    expect(arbiter(store('target.db'), 'create-client', 'untouched-svc').status).to.equal(0);
    expect(arbiter(store('live.db'), 'create-client', 'kept-svc').status).to.equal(0);
    expect(arbiterWith(WITH_KEY, store('live.db'), 'backup', join(dir, 'copy.db')).status).to.equal(0);

    // What an attacker who can write the backup would restore: a store with an Admin key of their own.
    const planted = await openArbiterStore(store('live.db'));
    await planted.collection(ADMIN_API_KEYS_COLLECTION, DEFAULT_TENANT).insert({
      id: 999,
      name: 'planted',
      role: 'admin',
      keyDigest: storageDigest('arbiter_admin_planted'),
      createdAt: new Date().toISOString(),
      createdBy: { id: null, name: 'bootstrap' },
    });
    await planted.close();
    copyFileSync(join(dir, 'live.db'), join(dir, 'planted.db'));
    const changed = readFileSync(join(dir, 'copy.db'));
    changed[Math.floor(changed.length / 2)]! ^= 0x01;
    writeFileSync(join(dir, 'changed.db'), changed);
    // A genuine backup of a newer release (rolled back since): this release cannot serve its store.
    copyFileSync(join(dir, 'live.db'), join(dir, 'newer-plain.db'));
    const newer = await openArbiterStore(store('newer-plain.db'));
    await newer.collection(SCHEMA_COLLECTION, DEFAULT_TENANT).update('version', { version: SCHEMA_VERSION + 1 });
    await newer.close();
    await sealFile(join(dir, 'newer-plain.db'), join(dir, 'newer.db'), SECRETS_KEY);

    for (const [file, env, why] of [
      ['planted.db', WITH_KEY, /is not a sealed Arbiter backup/],
      ['changed.db', WITH_KEY, /does not match its seal: it was changed or damaged/],
      [
        'copy.db',
        { SERVICE_SECRETS_KEY: randomBytes(32).toString('base64url') },
        /sealed with another SERVICE_SECRETS_KEY/,
      ],
      ['copy.db', {}, /SERVICE_SECRETS_KEY is not set/],
      [
        'newer.db',
        WITH_KEY,
        /the backup holds schema version \d+, newer than this Arbiter's \d+.*the store is unchanged/,
      ],
    ] as const) {
      const refused = arbiterWith(env, store('target.db'), 'restore', join(dir, file));
      expect(refused.status, `${file}: ${refused.stderr}`).to.equal(1);
      expect(refused.stderr, file).to.match(why);
    }
    const target = await openArbiterStore(store('target.db'));
    try {
      const clients = await target.collection('clients', DEFAULT_TENANT).find();
      expect(clients.map((client) => client.clientId)).to.deep.equal(['untouched-svc']);
      expect(await target.collection(ADMIN_API_KEYS_COLLECTION, DEFAULT_TENANT).find()).to.deep.equal([]);
    } finally {
      await target.close();
    }
    expect(readdirScratch(), 'no scratch file is left behind').to.deep.equal([]);
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
