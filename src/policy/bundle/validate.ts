/**
 * Whole-bundle validation: a rule or data write (or deletion) is checked inside the bundle it
 * would make, with every other bundled rule and data entry. First `opa check --bundle` (which
 * compiles rules against the data tree): a clash that no single file shows (two files of one
 * package both defining a default, a data key over a rule's path) is refused at the Admin API
 * instead of being stored and then refused by OPA, which would keep serving the old bundle.
 * Then a trial run (trial.ts): every decision point evaluated by OPA and Cedar on the contract's
 * examples and recently recorded inputs, so that a bundle that compiles but cannot decide (an
 * evaluation conflict) is refused too, instead of failing every request of that point closed.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Store } from '../../store/index.js';
import { buildBundle, snapshotOf } from './build.js';
import { contractExampleInputs, trialProblem, type TrialInput } from './trial.js';
import { inScratchDirectory, opaMessage, runOpa } from '../opa/binary.js';
import { isBundled, loadBundledRecords, type PolicyDataDoc, type PolicyRuleDoc } from '../records.js';

/**
 * A write to check: the record as it would be stored (null: the record `replacesId` is deleted),
 * the id of the record it replaces, and where to read the recorded inputs to try the bundle on
 * besides the contract's examples (only when the change touches the bundle).
 */
export type BundleChange = (
  | { collection: 'rules'; record: Partial<PolicyRuleDoc> | null }
  | { collection: 'data'; record: Partial<PolicyDataDoc> | null }
) & { tenantId: string | null; replacesId?: number; recordedInputs?: () => Promise<TrialInput[]> };

/** Null when the bundle with this change compiles and decides, else OPA's (or Cedar's) message naming the conflict. */
export async function bundleProblemWith(opaBinary: string, store: Store, change: BundleChange): Promise<string | null> {
  const records = await loadBundledRecords(store);
  const candidate = change.record
    ? ({ ...change.record, tenantId: change.tenantId } as PolicyRuleDoc & PolicyDataDoc)
    : null;
  const joins = candidate !== null && isBundled(candidate);
  const leaves = (existing: { id: number; path?: string; dataKey?: string }) =>
    existing.id === change.replacesId ||
    (candidate !== null &&
      (change.collection === 'rules' ? existing.path === candidate.path : existing.dataKey === candidate.dataKey));
  const touchesBundle = joins || (change.collection === 'rules' ? records.rules : records.data).some(leaves);
  if (!touchesBundle) return null;
  const next =
    change.collection === 'rules'
      ? { rules: [...records.rules.filter((rule) => !leaves(rule)), ...(joins ? [candidate] : [])], data: records.data }
      : {
          rules: records.rules,
          data: [...records.data.filter((entry) => !leaves(entry)), ...(joins ? [candidate] : [])],
        };
  const what = whatChanges(change.collection, candidate, [...records.rules, ...records.data].find(leaves));
  try {
    return await inScratchDirectory('arbiter-bundle-check-', async (dir) => {
      const file = join(dir, 'bundle.tar.gz');
      const snapshot = snapshotOf(next);
      await writeFile(file, await buildBundle(snapshot));
      const checked = await runOpa(opaBinary, ['check', '--bundle', file]);
      if (checked.exitCode !== 0)
        return `the policy bundle would not compile with ${what}: ${opaMessage(checked, file, dir)}`;
      const inputs = [...contractExampleInputs(), ...((await change.recordedInputs?.()) ?? [])];
      const failure = await trialProblem(opaBinary, file, dir, snapshot, inputs);
      return failure && `the policy bundle could not decide with ${what}: ${failure}`;
    });
  } catch (error) {
    return `the policy bundle could not be built with ${what}: ${(error as Error).message}`;
  }
}

/** The change in words, naming its file or data key (OPA's error may point at the other side of a conflict). */
function whatChanges(
  collection: BundleChange['collection'],
  candidate: { path?: string; dataKey?: string } | null,
  leaving: { path?: string; dataKey?: string } | undefined,
): string {
  const name = (record: { path?: string; dataKey?: string }) =>
    collection === 'rules' ? `rule ${record.path}` : `data ${record.dataKey}`;
  if (candidate) return `this change (${name(candidate)})`;
  return leaving ? `this change (without ${name(leaving)})` : 'this change';
}
