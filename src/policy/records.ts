import {
  definitionFor,
  policyDataRecords,
  policyRuleRecords,
  presentedForm,
  type PolicyDataRecord,
  type PolicyRuleRecord,
} from '../catalog/index.js';
import { DEFAULT_TENANT, TurnReads, type CollectionSpec, type Store } from '../store/index.js';

/** A policy rule as the Admin API stores it (collection `policy_rules`), its type derived from the catalog's schema. */
export type PolicyRuleDoc = PolicyRuleRecord;

/** A policy data entry as the Admin API stores it (collection `policy_data`); policies see its JSON payload at data.<dataKey>. */
export type PolicyDataDoc = PolicyDataRecord;

/** The shared collections of rules and data as src/catalog declares them (for the seed's id sequences, and tests). */
export const POLICY_RULES: CollectionSpec = policyRuleRecords.spec;
export const POLICY_DATA: CollectionSpec = policyDataRecords.spec;

/** The shared (bundled) rules and data: no tenant, no version label, rules enabled. Sorted for determinism. */
export interface BundledRecords {
  rules: PolicyRuleDoc[];
  data: PolicyDataDoc[];
}

export function isBundled(record: {
  tenantId?: unknown;
  version?: unknown;
  enabled?: unknown;
  mode?: unknown;
}): boolean {
  return isShared(record) && record.enabled !== false && record.mode !== 'shadow';
}

/** A shadow record that takes part in the candidate revision: shared and without a version label (a disabled shadow rule removes its path there). */
export function isBundledShadow(record: { tenantId?: unknown; version?: unknown; mode?: unknown }): boolean {
  return isShared(record) && record.mode === 'shadow';
}

function isShared(record: { tenantId?: unknown; version?: unknown }): boolean {
  const unversioned = record.version === null || record.version === undefined || record.version === '';
  const untenanted = record.tenantId === null || record.tenantId === undefined;
  return unversioned && untenanted;
}

export async function loadBundledRecords(store: Store): Promise<BundledRecords> {
  return (await loadPolicyLayers(store)).live;
}

/**
 * The live records (the bundle in force) and the shadow ones (with their path and data key under
 * their own names), both sorted. Shadow rules include disabled ones: they take their path out of
 * the candidate revision.
 */
export interface PolicyLayers {
  live: BundledRecords;
  shadow: BundledRecords;
}

/**
 * On a store that announces policy writes, how long a read may serve without one: the fallback
 * should a notification be lost.
 */
const ANNOUNCED_POLICY_HOLD_MS = 1000;

/**
 * Read often (each held bundle poll looks every 100 ms, the signals' watch and the shadow's drain
 * on their own clocks) and written rarely: a read is kept while neither collection changed, where
 * the store can tell without reading them (Store.changesTo, SQLite); where it announces writes
 * (Store.watch: PostgreSQL's NOTIFY), until a write of any node is announced, or a second at most
 * should an announcement be lost; else for the turn
 * (TurnReads). Never handed to a request that began before it: a held poll must see another
 * process's write at its next look. Shared: callers derive, never change, what they are given.
 */
const policyLayerReads = new TurnReads<PolicyLayers>({
  collections: [POLICY_RULES.name, POLICY_DATA.name],
  announced: true,
  announcedHoldMs: ANNOUNCED_POLICY_HOLD_MS,
  sharedWithEarlierRequests: false,
});

export function loadPolicyLayers(store: Store): Promise<PolicyLayers> {
  return policyLayerReads.read(store, 'layers', () => readPolicyLayers(store));
}

async function readPolicyLayers(store: Store): Promise<PolicyLayers> {
  const [rules, data] = await Promise.all([
    policyRuleRecords(store, DEFAULT_TENANT).find({ tenantId: null }),
    policyDataRecords(store, DEFAULT_TENANT).find({ tenantId: null }),
  ]);
  const rulesDefinition = definitionFor('policy-rules')!;
  const dataDefinition = definitionFor('policy-data')!;
  return {
    live: sorted({ rules: rules.filter(isBundled), data: data.filter(isBundled) }),
    shadow: sorted({
      rules: rules.filter(isBundledShadow).map((rule) => presentedForm(rulesDefinition, rule)),
      data: data.filter(isBundledShadow).map((entry) => presentedForm(dataDefinition, entry)),
    }),
  };
}

/**
 * The candidate revision's records: the live ones with each shadow in place of the live record
 * of its path (or data key), or beside them; a disabled shadow rule takes its path out.
 */
export function withShadows(live: BundledRecords, shadow: BundledRecords): BundledRecords {
  const shadowPaths = new Set(shadow.rules.map((rule) => rule.path));
  const shadowKeys = new Set(shadow.data.map((entry) => entry.dataKey));
  return sorted({
    rules: [
      ...live.rules.filter((rule) => !shadowPaths.has(rule.path)),
      ...shadow.rules.filter((rule) => rule.enabled !== false),
    ],
    data: [...live.data.filter((entry) => !shadowKeys.has(entry.dataKey)), ...shadow.data],
  });
}

/** Rules by path, data by key: the order the store's bundle has, so that a candidate's revision is the one it gets once written. */
export function sorted(records: BundledRecords): BundledRecords {
  return {
    rules: [...records.rules].sort((a, b) => compare(a.path, b.path)),
    data: [...records.data].sort((a, b) => compare(a.dataKey, b.dataKey)),
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
