import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { openStore } from '../../src/store/open.js';
import { describeStoreConformance } from './conformance.js';

describeStoreConformance('sqlite in memory', () => openStore('sqlite::memory:'));

describe('SQLite store in a file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbiter-sqlite-'));
  let files = 0;
  const freshFile = () => join(dir, `store-${++files}.db`);

  after(() => rmSync(dir, { recursive: true, force: true }));

  describeStoreConformance('sqlite file', () => openStore(`sqlite:${freshFile()}`));

  it('purgeExpired also covers collections this process has not declared', async () => {
    const file = freshFile();
    const writer = await openStore(`sqlite:${file}`);
    await writer.collection('codes').insert({ id: 'a', expiresAt: Date.now() - 1000 });
    await writer.close();
    const restarted = await openStore(`sqlite:${file}`);
    try {
      expect(await restarted.purgeExpired()).to.equal(1);
    } finally {
      await restarted.close();
    }
  });
});
