import { policyDataRecords, policyRuleRecords } from '../catalog/index.js';
import { DEFAULT_TENANT, type CollectionSpec, type Store, type StoredDoc } from '../store/index.js';

/** A policy rule as the Admin API stores it (collection `policy_rules`). */
export interface PolicyRuleDoc extends StoredDoc {
  id: number;
  version: string | null;
  kind: 'rego' | 'cedar';
  /** File path inside the bundle, e.g. "arbiter/token/token.rego". */
  path: string;
  content: string;
  enabled: boolean;
  digest: string | null;
  tenantId: string | null;
  createdAt: string;
  updatedAt: string;
}

/** A policy data entry as the Admin API stores it (collection `policy_data`). */
export interface PolicyDataDoc extends StoredDoc {
  id: number;
  /** Dot-separated identifiers; policies see the payload at data.<dataKey>. */
  dataKey: string;
  /** JSON text. */
  payload: string;
  version: string | null;
  tenantId: string | null;
  createdAt: string;
  updatedAt: string;
}

/** The shared collections of rules and data as src/catalog declares them (for the seed's id sequences, and tests). */
export const POLICY_RULES: CollectionSpec = policyRuleRecords.spec;
export const POLICY_DATA: CollectionSpec = policyDataRecords.spec;

/** The shared (bundled) rules and data: no tenant, no version label, rules enabled. Sorted for determinism. */
export interface BundledRecords {
  rules: PolicyRuleDoc[];
  data: PolicyDataDoc[];
}

export function isBundled(record: { tenantId?: unknown; version?: unknown; enabled?: unknown }): boolean {
  const unversioned = record.version === null || record.version === undefined || record.version === '';
  const untenanted = record.tenantId === null || record.tenantId === undefined;
  return unversioned && untenanted && record.enabled !== false;
}

export async function loadBundledRecords(store: Store): Promise<BundledRecords> {
  const [rules, data] = await Promise.all([
    policyRuleRecords<PolicyRuleDoc>(store, DEFAULT_TENANT).find({ tenantId: null }),
    policyDataRecords<PolicyDataDoc>(store, DEFAULT_TENANT).find({ tenantId: null }),
  ]);
  return {
    rules: rules.filter(isBundled).sort((a, b) => compare(a.path, b.path)),
    data: data.filter(isBundled).sort((a, b) => compare(a.dataKey, b.dataKey)),
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
