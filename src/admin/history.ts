/**
 * The history of policy rules and policy data: every create, replace, delete and rollback through
 * the Admin API keeps the record's state as a numbered version (1, 2, 3 … per record), at most
 * POLICY_HISTORY_VERSIONS per record (the oldest go first). A record that existed before its
 * first change through the API (the seeded pack, a store from before history was kept) gets its
 * state then as version 1 (`baseline`) at that change.
 */
import { ConflictError, type Store, type StoredDoc, type TenantCollection } from '../store/index.js';
import { storeTenant } from '../tenancy/index.js';
import type { StoredRecord } from '../records/index.js';
import { POLICY_HISTORY_COLLECTION } from './collections.js';

/** The collections whose records keep their versions (list, diff, roll back: history-routes.ts). */
export const HISTORY_COLLECTIONS = ['policy-rules', 'policy-data'];

export type HistoryAction = 'baseline' | 'create' | 'replace' | 'delete' | 'rollback';

/** One version of one record: its state after the change (null once deleted). */
export interface HistoryVersion extends StoredDoc {
  /** `<collection>:<recordId>:<number>`: two writers cannot both take a number. */
  id: string;
  collection: string;
  recordId: number;
  number: number;
  action: HistoryAction;
  /** The version a rollback restored. */
  rolledBackTo?: number;
  record: StoredRecord | null;
  at: string;
}

/** How many times a version number is taken again after another writer took it first. */
const NUMBER_ATTEMPTS = 5;

/** The versions of one collection's records (`policy-rules` or `policy-data`), tenant by tenant. */
export class RecordHistory {
  constructor(
    private readonly store: Store,
    /** The collection's path under /admin/api, which names its versions. */
    readonly collection: string,
    private readonly maxVersions: number,
  ) {}

  private versions(tenantId: string | null): TenantCollection<HistoryVersion> {
    return this.store.collection<HistoryVersion>(POLICY_HISTORY_COLLECTION, storeTenant(tenantId));
  }

  /**
   * Keeps the state a change left (`after`, null for a delete). `before` is the state it
   * changed: kept as the baseline when the record has no version yet.
   */
  async recorded(
    tenantId: string | null,
    action: Exclude<HistoryAction, 'baseline'>,
    before: StoredRecord | null,
    after: StoredRecord | null,
    rolledBackTo?: number,
  ): Promise<void> {
    const record = after ?? before;
    if (!record) return;
    const recordId = record.id;
    if (before && (await this.latest(tenantId, recordId)) === null) {
      // A record seeded without times (0.1's policy rules) dates its baseline now.
      await this.append(tenantId, recordId, 'baseline', before, before.updatedAt ?? new Date().toISOString());
    }
    await this.append(tenantId, recordId, action, after, new Date().toISOString(), rolledBackTo);
    await this.prune(tenantId, recordId);
  }

  /** The record's versions, newest first. */
  async list(tenantId: string | null, recordId: number): Promise<HistoryVersion[]> {
    return this.versions(tenantId).find(
      { collection: this.collection, recordId },
      { sort: { field: 'number', direction: 'desc' } },
    );
  }

  async version(tenantId: string | null, recordId: number, number: number): Promise<HistoryVersion | null> {
    return this.versions(tenantId).get(versionId(this.collection, recordId, number));
  }

  private async latest(tenantId: string | null, recordId: number): Promise<HistoryVersion | null> {
    const [newest] = await this.versions(tenantId).find(
      { collection: this.collection, recordId },
      { sort: { field: 'number', direction: 'desc' }, limit: 1 },
    );
    return newest ?? null;
  }

  private async append(
    tenantId: string | null,
    recordId: number,
    action: HistoryAction,
    record: StoredRecord | null,
    at: string,
    rolledBackTo?: number,
  ): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      const number = ((await this.latest(tenantId, recordId))?.number ?? 0) + 1;
      try {
        await this.versions(tenantId).insert({
          id: versionId(this.collection, recordId, number),
          collection: this.collection,
          recordId,
          number,
          action,
          ...(rolledBackTo === undefined ? {} : { rolledBackTo }),
          record,
          at,
        });
        return;
      } catch (error) {
        // Another change of the same record took this number meanwhile: take the next one.
        if (!(error instanceof ConflictError) || attempt >= NUMBER_ATTEMPTS) throw error;
      }
    }
  }

  /** Keeps the newest maxVersions versions of the record. */
  private async prune(tenantId: string | null, recordId: number): Promise<void> {
    const all = await this.list(tenantId, recordId);
    for (const old of all.slice(this.maxVersions)) await this.versions(tenantId).delete(old.id);
  }
}

function versionId(collection: string, recordId: number, number: number): string {
  return `${collection}:${recordId}:${number}`;
}
