import { expect } from 'chai';
import { mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Checkpointer } from '../../../adapters/sqlite/checkpointer.js';
import { changeOf, identityOf, unwritableCode, type FileIdentity } from '../../../adapters/sqlite/files.js';
import { projectPath } from '../../../src/config/index.js';
import { eventually } from '../../support/oauth.js';

/** The SQLite store's file check (adapters/sqlite/files.ts), one module for the store and its checkpointer thread. */
describe('unit: the SQLite files check (adapters/sqlite/files)', function () {
  let dir: string;

  beforeEach(function () {
    dir = mkdtempSync(join(tmpdir(), 'arbiter-files-'));
  });

  afterEach(function () {
    rmSync(dir, { recursive: true, force: true });
  });

  it('tells a file still there from one deleted or replaced, and names why one cannot be written', function () {
    const path = join(dir, 'store.db');
    writeFileSync(path, 'opened');
    const opened = identityOf(path) as FileIdentity;
    expect(changeOf(opened)).to.equal(null);
    expect(unwritableCode(path)).to.equal(null);
    writeFileSync(join(dir, 'other'), 'another');
    renameSync(join(dir, 'other'), path);
    expect(changeOf(opened)).to.equal('replaced');
    rmSync(path);
    expect(changeOf(opened)).to.equal('missing');
    expect(identityOf(path)).to.equal(null);
    expect(unwritableCode(path)).to.equal('ENOENT');
  });

  it('is the check the checkpointer thread runs (no copy of its own), which loads it and checkpoints', async function () {
    const source = readFileSync(projectPath('adapters', 'sqlite', 'checkpointer.ts'), 'utf8');
    expect(source, 'the thread checks files with files.ts only').to.not.match(/statSync|accessSync/);
    const file = join(dir, 'store.db');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('wal_autocheckpoint = 0');
    db.exec('CREATE TABLE t (x); INSERT INTO t VALUES (1)');
    // The table's pages are in the WAL yet: the database file grows when a checkpoint copies them.
    const before = statSync(file).size;
    const files = [file, `${file}-wal`, `${file}-shm`].map((path) => identityOf(path) as FileIdentity);
    const checkpointer = new Checkpointer(file, files);
    try {
      await eventually(() => statSync(file).size > before, 30_000);
    } finally {
      await checkpointer.stop();
      db.close();
    }
  });
});
