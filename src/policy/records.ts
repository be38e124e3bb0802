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

/*
 * Declared exactly as the Admin API declares them (src/admin/records.ts): a store remembers
 * the first declaration of a collection, and the seed may run before the Admin API does.
 */
export const POLICY_RULES: CollectionSpec = { name: 'policy_rules', uniqueKeys: [['path']], indexes: ['path'] };
export const POLICY_DATA: CollectionSpec = { name: 'policy_data', uniqueKeys: [['dataKey']], indexes: ['dataKey'] };

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
    store.collection<PolicyRuleDoc>(POLICY_RULES, DEFAULT_TENANT).find({ tenantId: null }),
    store.collection<PolicyDataDoc>(POLICY_DATA, DEFAULT_TENANT).find({ tenantId: null }),
  ]);
  return {
    rules: rules.filter(isBundled).sort((a, b) => compare(a.path, b.path)),
    data: data.filter(isBundled).sort((a, b) => compare(a.dataKey, b.dataKey)),
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
