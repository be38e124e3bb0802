/**
 * Whole-bundle validation: a rule or data write is checked inside the bundle it would make,
 * with every other bundled rule and data entry, by `opa check --bundle` (which compiles rules
 * against the data tree). A clash that no single file shows (two files of one package both
 * defining a default, a data key over a rule's path) is refused at the Admin API instead of
 * being stored and then refused by OPA, which would keep serving the old bundle.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Store } from '../../store/index.js';
import { buildBundle, snapshotOf } from './build.js';
import { inScratchDirectory, opaMessage, runOpa } from '../opa/binary.js';
import { isBundled, loadBundledRecords, type PolicyDataDoc, type PolicyRuleDoc } from '../records.js';

/** A write to check: the record as it would be stored, and the id of the record it replaces. */
export type BundleChange =
  | { collection: 'rules'; record: Partial<PolicyRuleDoc>; tenantId: string | null; replacesId?: number }
  | { collection: 'data'; record: Partial<PolicyDataDoc>; tenantId: string | null; replacesId?: number };

/** Null when the bundle with this change compiles, else OPA's message naming the conflict. */
export async function bundleProblemWith(opaBinary: string, store: Store, change: BundleChange): Promise<string | null> {
  const records = await loadBundledRecords(store);
  const candidate = { ...change.record, tenantId: change.tenantId } as PolicyRuleDoc & PolicyDataDoc;
  const joins = isBundled(candidate);
  const leaves = (existing: { id: number; path?: string; dataKey?: string }) =>
    existing.id === change.replacesId ||
    (change.collection === 'rules' ? existing.path === candidate.path : existing.dataKey === candidate.dataKey);
  const touchesBundle = joins || (change.collection === 'rules' ? records.rules : records.data).some(leaves);
  if (!touchesBundle) return null;
  const next =
    change.collection === 'rules'
      ? { rules: [...records.rules.filter((rule) => !leaves(rule)), ...(joins ? [candidate] : [])], data: records.data }
      : {
          rules: records.rules,
          data: [...records.data.filter((entry) => !leaves(entry)), ...(joins ? [candidate] : [])],
        };
  try {
    return await inScratchDirectory('arbiter-bundle-check-', async (dir) => {
      const file = join(dir, 'bundle.tar.gz');
      await writeFile(file, await buildBundle(snapshotOf(next)));
      const checked = await runOpa(opaBinary, ['check', '--bundle', file]);
      if (checked.exitCode === 0) return null;
      return `the policy bundle would not compile with this change: ${opaMessage(checked, file, dir)}`;
    });
  } catch (error) {
    return `the policy bundle could not be built with this change: ${(error as Error).message}`;
  }
}
