/**
 * Whole-bundle validation: a rule or data write (or deletion) is checked inside the bundle it
 * would make, with every other bundled rule and data entry. First `opa check --bundle` (which
 * compiles rules against the data tree): a clash that no single file shows (two files of one
 * package both defining a default, a data key over a rule's path) is refused at the Admin API
 * instead of being stored and then refused by OPA, which would keep serving the old bundle.
 * Then a trial run (trial.ts): every decision point evaluated by OPA and Cedar on the contract's
 * examples and recently recorded inputs, so that a bundle that compiles but cannot decide (an
 * evaluation conflict) is refused too, instead of failing every request of that point closed.
 *
 * The same checks make the candidate bundle of a proposed change (several records at once) that
 * impact analysis replays recorded decisions against, and the candidate revision of shadow
 * records (the live records with the shadows in their place).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isUnavailable } from '../../http/errors.js';
import type { Store } from '../../store/index.js';
import { buildBundle, snapshotOf, type PolicySnapshot } from './build.js';
import type { SchemaCarrier } from './data-schemas.js';
import { policySandbox, SandboxJobError, SandboxLimitError } from '../sandbox/index.js';
import { contractExampleInputs, trialProblem, type TrialInput } from './trial.js';
import { opaMessage, runOpa, type OpaLane } from '../opa/binary.js';
import { inScratchDirectory } from '../opa/scratch.js';
import { ContentMemo, opaOutcomeKey } from '../opa/memo.js';
import { POLICY_PACK_DIR } from '../seed.js';
import { NOT_ALLOWED, policySandboxLimits } from '../opa/sandbox.js';
import {
  isBundled,
  isBundledShadow,
  loadPolicyLayers,
  sorted,
  withShadows,
  type BundledRecords,
  type PolicyDataDoc,
  type PolicyRuleDoc,
} from '../records.js';

/**
 * Null when OPA may be given this bundle, else OPA's message naming the forbidden builtins its
 * rules use (opa/sandbox.ts). Every write is checked so, but a rule stored before the sandbox
 * (or written to the store behind the Admin API) is found here, before the managed OPA, which
 * takes no capabilities, would run it. Other compile errors are left for OPA to refuse.
 */
export async function sandboxProblem(opaBinary: string, bundle: Buffer): Promise<string | null> {
  const checked = await bundleChecked(opaBinary, bundle, 'live');
  return checked && checked.includes(NOT_ALLOWED) ? checked : null;
}

/**
 * Bundles checked, by content (opa/memo.ts): a write's check of its candidate is the check the
 * bundle route then makes before serving that revision, and test servers share their bundles.
 */
const bundleChecks = new ContentMemo<string | null>({
  maxEntries: 64,
  maxBytes: 1024 * 1024,
  sizeOf: (message) => message?.length ?? 0,
});

/**
 * `opa check --bundle` with the sandbox's capabilities: null when the bundle compiles, else OPA's
 * message (without the scratch paths). Rejects when OPA could not run (busy, killed at a limit).
 */
function bundleChecked(opaBinary: string, bundle: Buffer, lane: OpaLane): Promise<string | null> {
  return bundleChecks.get(opaOutcomeKey('opa check --bundle', opaBinary, bundle), () =>
    inScratchDirectory('arbiter-bundle-check-', async (dir) => {
      const file = join(dir, 'bundle.tar.gz');
      await writeFile(file, bundle);
      const checked = await runOpa(opaBinary, ['check', '--bundle', file], lane);
      return checked.exitCode === 0 ? null : opaMessage(checked, file, dir);
    }),
  );
}

/** One record written (as it would be stored, with its path or data key), or deleted (null: the record `replacesId`). */
export type RecordChange = (
  | { collection: 'rules'; record: Partial<PolicyRuleDoc> | null }
  | { collection: 'data'; record: Partial<PolicyDataDoc> | null }
) & { tenantId: string | null; replacesId?: number };

/**
 * A write to check: the record as it would be stored (null: the record `replacesId` is deleted),
 * the id of the record it replaces, and where to read the recorded inputs to try the bundle on
 * besides the contract's examples (only when the change touches the bundle). `shadow`: the
 * change is to a shadow record, so the candidate revision is what must still compile and decide.
 */
export type BundleChange = RecordChange & { recordedInputs?: () => Promise<TrialInput[]>; shadow?: boolean };

/** Which records the changes apply to: the live ones (the bundle in force) or the shadows (the candidate revision). */
export type PolicyLayer = 'live' | 'shadow';

/** A candidate bundle that compiled and decided (`touched`: some change reached the bundle), or why not. */
export type TriedBundle = { snapshot: PolicySnapshot; touched: boolean } | { problem: string };

/** Null when the bundle with this change compiles and decides, else OPA's (or Cedar's) message naming the conflict. */
export async function bundleProblemWith(opaBinary: string, store: Store, change: BundleChange): Promise<string | null> {
  const tried = await tryBundleWith(opaBinary, store, [change], {
    layer: change.shadow ? 'shadow' : 'live',
    recordedInputs: change.recordedInputs,
  });
  return 'problem' in tried ? tried.problem : null;
}

/**
 * The bundle the changes make, in order, of the live records (or of the shadows: then the
 * candidate revision, live records with the shadows in their place), checked as one write is:
 * compiled, and tried on the contract's examples and `recordedInputs`. A change that reaches no
 * bundled record (a tenant's record, a versioned draft) leaves the bundle as it is, unchecked.
 */
export async function tryBundleWith(
  opaBinary: string,
  store: Store,
  changes: RecordChange[],
  options: { layer: PolicyLayer; recordedInputs?: () => Promise<TrialInput[]> },
): Promise<TriedBundle> {
  const layers = await loadPolicyLayers(store);
  const joins = options.layer === 'live' ? isBundled : isBundledShadow;
  let records = options.layer === 'live' ? layers.live : layers.shadow;
  let touched = options.layer === 'shadow' && changes.length > 0;
  const described: string[] = [];
  for (const change of changes) {
    const applied = applyChange(records, change, joins);
    records = applied.records;
    touched ||= applied.touched;
    described.push(applied.description);
  }
  const next = options.layer === 'live' ? sorted(records) : withShadows(layers.live, records);
  if (!touched) return { snapshot: snapshotOf(next), touched };
  const what =
    described.length === 1 ? `this change${described[0]}` : `these changes (${described.map(bare).join(', ')})`;
  // Before the snapshot: deriving it parses, merges and hashes every record on the event loop, in
  // proportion to their size (found 2026-11-29: a write refused as too big held the loop up to 0.5 s).
  const tooBig = bundleSizeProblem(next, layers.live);
  if (tooBig) return { problem: `the policy bundle would be too big with ${what}: ${tooBig}` };
  const snapshot = snapshotOf(next);
  const mismatch = await dataSchemasProblem(snapshot.mergedData, next.data);
  if (mismatch) return { problem: `${mismatch} (with ${what})` };
  try {
    const bundle = await buildBundle(snapshot);
    const compileProblem = await bundleChecked(opaBinary, bundle, 'submitted');
    if (compileProblem) return { problem: `the policy bundle would not compile with ${what}: ${compileProblem}` };
    const inputs = [...contractExampleInputs(), ...((await options.recordedInputs?.()) ?? [])];
    const failure = await triedOn(opaBinary, bundle, snapshot, inputs);
    return failure ? { problem: `the policy bundle could not decide with ${what}: ${failure}` } : { snapshot, touched };
  } catch (error) {
    // A dependency that cannot answer now (the store, no policy sandbox thread free) is its 503, not the change's fault.
    if (isUnavailable(error)) throw error;
    return { problem: `the policy bundle could not be built with ${what}: ${(error as Error).message}` };
  }
}

/**
 * Trials passed, by bundle and inputs (opa/memo.ts): the same candidate tried on the same
 * inputs passes again. Only passes are kept: a refusal may be a slow run on a busy machine
 * (POLICY_DECISION_TIMEOUT_MS), which a retry must be able to pass.
 */
const trialsPassed = new ContentMemo<string | null>({ maxEntries: 256, maxBytes: 1024 * 1024, sizeOf: () => 0 });

/** trial.ts's trialProblem of the bundle (written to a scratch file), unless it passed the same trial before. */
function triedOn(
  opaBinary: string,
  bundle: Buffer,
  snapshot: PolicySnapshot,
  inputs: TrialInput[],
): Promise<string | null> {
  const key = opaOutcomeKey('trial', opaBinary, bundle, JSON.stringify(inputs));
  const run = () =>
    inScratchDirectory('arbiter-bundle-trial-', async (dir) => {
      const file = join(dir, 'bundle.tar.gz');
      await writeFile(file, bundle);
      return trialProblem(opaBinary, file, dir, snapshot, inputs);
    });
  return trialsPassed.get(key, run, (problem) => problem === null);
}

/**
 * The merged data against the default pack's schemas (policies/<key>/data.schema.json) and the
 * entries' own, in the policy sandbox: an author's schema may take Ajv any time on the data, so a
 * limit it reaches is the change's problem, told as such; a sandbox with no thread free is a 503
 * (thrown).
 */
async function dataSchemasProblem(
  mergedData: Record<string, unknown>,
  entries: SchemaCarrier[],
): Promise<string | null> {
  try {
    return await policySandbox().dataSchemaProblem(mergedData, entries, POLICY_PACK_DIR);
  } catch (error) {
    if (error instanceof SandboxLimitError || error instanceof SandboxJobError)
      return `the policy data could not be checked against its schemas: ${error.message}`;
    throw error;
  }
}

/**
 * Every OPA run and the managed OPA hold the whole bundle: one over POLICY_BUNDLE_MAX_BYTES
 * (rules and data as stored) is refused, unless the change makes it smaller than the bundle in
 * force (so that a limit lowered below the live bundle still lets it shrink).
 */
function bundleSizeProblem(next: BundledRecords, live: BundledRecords): string | null {
  const { bundleMaxBytes } = policySandboxLimits();
  const bytes = bundleBytes(next);
  if (bytes <= bundleMaxBytes || bytes < bundleBytes(live)) return null;
  return `its rules and data would be ${bytes} bytes, over the limit of ${bundleMaxBytes} bytes (POLICY_BUNDLE_MAX_BYTES)`;
}

function bundleBytes(records: BundledRecords): number {
  const sizes = [
    ...records.rules.map((rule) => Buffer.byteLength(rule.content ?? '')),
    ...records.data.map((entry) => Buffer.byteLength(entry.payload ?? '')),
  ];
  return sizes.reduce((total, size) => total + size, 0);
}

/** The records with one change made: the record it replaces (by id, or by its path or data key) leaves, the new one joins. */
function applyChange(
  records: BundledRecords,
  change: RecordChange,
  joins: (record: Record<string, unknown>) => boolean,
): { records: BundledRecords; touched: boolean; description: string } {
  const candidate = change.record
    ? ({ ...change.record, tenantId: change.tenantId } as PolicyRuleDoc & PolicyDataDoc)
    : null;
  const joining = candidate !== null && joins(candidate);
  // Only a shared record takes a shared one's place by its path or data key: a tenant's record at
  // that path is not bundled, and leaves the shared policy as it is.
  const leaves = (existing: { id: number; path?: string; dataKey?: string }) =>
    existing.id === change.replacesId ||
    (candidate !== null &&
      change.tenantId === null &&
      (change.collection === 'rules' ? existing.path === candidate.path : existing.dataKey === candidate.dataKey));
  const pool: { id: number; path?: string; dataKey?: string }[] =
    change.collection === 'rules' ? records.rules : records.data;
  const leaving = pool.find(leaves);
  const touched = joining || leaving !== undefined;
  const next =
    change.collection === 'rules'
      ? {
          rules: [...records.rules.filter((rule) => !leaves(rule)), ...(joining ? [candidate] : [])],
          data: records.data,
        }
      : {
          rules: records.rules,
          data: [...records.data.filter((entry) => !leaves(entry)), ...(joining ? [candidate] : [])],
        };
  return { records: next, touched, description: whatChanges(change.collection, candidate, leaving) };
}

/** The change in words, naming its file or data key (OPA's error may point at the other side of a conflict). */
function whatChanges(
  collection: RecordChange['collection'],
  candidate: { path?: string; dataKey?: string } | null,
  leaving: { path?: string; dataKey?: string } | undefined,
): string {
  const name = (record: { path?: string; dataKey?: string }) =>
    collection === 'rules' ? `rule ${record.path}` : `data ${record.dataKey}`;
  if (candidate) return ` (${name(candidate)})`;
  return leaving ? ` (without ${name(leaving)})` : '';
}

function bare(description: string): string {
  return description.replace(/^ \(|\)$/g, '') || 'a deletion';
}
