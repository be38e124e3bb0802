import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { openArbiterStore as openStore } from '../../../src/collections.js';
import { asRequestBegunNow } from '../../../src/http/request-start.js';
import { snapshotOf } from '../../../src/policy/bundle/build.js';
import { loadPolicyLayers } from '../../../src/policy/records.js';
import type { Store } from '../../../src/store/index.js';
import { putData, putRule } from '../../policy/support.js';

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('unit: the policy records, read while unchanged (policy/records.ts, bundle/build.ts)', () => {
  let dir: string;
  let here: Store;
  let there: Store;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'arbiter-policy-layers-'));
    // Two connections to one file: a second one is what another worker process has.
    here = await openStore(`sqlite:${join(dir, 'arbiter.db')}`);
    there = await openStore(`sqlite:${join(dir, 'arbiter.db')}`);
  });

  after(async () => {
    await here?.close();
    await there?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('hands out one read, and one snapshot of it, across turns until a rule or data entry is written here or in another process', async () => {
    await putRule(here, { path: 'layers/a.rego', content: 'package layers.a\n' });
    const first = await loadPolicyLayers(here);
    await nextTurn();
    const again = await loadPolicyLayers(here);
    expect(again, 'not read again while unchanged').to.equal(first);
    expect(snapshotOf(again.live), 'the snapshot is derived once').to.equal(snapshotOf(first.live));

    // Another process's write is seen at the very next read, without waiting for a turn.
    await putData(there, 'layers', { from: 'there' });
    const afterData = await loadPolicyLayers(here);
    expect(afterData).to.not.equal(first);
    expect(afterData.live.data.map((entry) => entry.dataKey)).to.include('layers');
    expect(snapshotOf(afterData.live).revision).to.not.equal(snapshotOf(first.live).revision);

    // A write through this store ends the kept read before its writer is answered.
    await putRule(here, { path: 'layers/a.rego', content: 'package layers.a\n\nx := 1\n' });
    const afterRule = await loadPolicyLayers(here);
    expect(afterRule.live.rules.find((rule) => rule.path === 'layers/a.rego')?.content).to.contain('x := 1');
  });

  it("shows a request that began before a read (a held bundle poll) another process's later write at its next read", async () => {
    await asRequestBegunNow(async () => {
      // A write elsewhere first, so that the read below is made after the request began.
      await putData(there, 'earlier', { written: 'before the read' });
      const before = await loadPolicyLayers(here);
      expect(before.live.data.map((entry) => entry.dataKey)).to.include('earlier');
      expect(before.live.data.map((entry) => entry.dataKey)).to.not.include('later');
      await putData(there, 'later', { written: 'after the poll began' });
      await nextTurn();
      const next = await loadPolicyLayers(here);
      expect(
        next.live.data.map((entry) => entry.dataKey),
        'not the read made before the write',
      ).to.include('later');
    });
  });
});
