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

describe('unit: the SQLite checkpointer thread (adapters/sqlite/checkpointer)', function () {
  let dir: string;
  let db: Database.Database;
  let checkpointer: Checkpointer;
  let file: string;

  beforeEach(function () {
    dir = mkdtempSync(join(tmpdir(), 'arbiter-checkpointer-'));
    file = join(dir, 'store.db');
    db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('wal_autocheckpoint = 0');
    db.exec('CREATE TABLE t (x)');
    const files = [file, `${file}-wal`, `${file}-shm`].map((path) => identityOf(path) as FileIdentity);
    // The store's intervals (200 ms, resting up to 3.2 s) scaled down by 4.
    checkpointer = new Checkpointer(file, files, { intervalMs: 50, restingMs: 800 });
  });

  afterEach(async function () {
    await checkpointer.stop();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('waits longer and longer while nothing is written: a few checkpoints of an idle store, not one each interval', async function () {
    await eventually(async () => (await checkpointer.stats())?.waitMs === 800, 20_000, 50);
    const before = (await checkpointer.stats())!.checkpoints;
    // 20 intervals: 20 checkpoints before the rest existed.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const after = (await checkpointer.stats())!;
    expect(after.checkpoints - before, 'checkpoints of an idle store in 1 s').to.be.at.most(2);
    expect(after.waitMs).to.equal(800);
  });

  it('checkpoints at once after a write that ends its rest, and keeps the short interval while writes go on', async function () {
    await eventually(async () => (await checkpointer.stats())?.waitMs === 800, 20_000, 50);
    // Just after a checkpoint of the rest: the next one would be 800 ms away.
    const resting = (await checkpointer.stats())!.checkpoints;
    await eventually(async () => (await checkpointer.stats())!.checkpoints > resting, 10_000, 10);
    const before = statSync(file).size;
    db.exec('INSERT INTO t VALUES (randomblob(100000))');
    checkpointer.written();
    await eventually(() => statSync(file).size > before, 500, 10);
    db.exec('INSERT INTO t VALUES (randomblob(100000))');
    expect((await checkpointer.stats())!.waitMs, 'the short interval while writes go on').to.be.below(800);
  });
});
