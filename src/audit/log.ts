import { DEFAULT_TENANT, type Filter, type Store, type StoredDoc, type TenantCollection } from '../store/index.js';

export const AUDIT_LOG_COLLECTION = { name: 'audit_logs', indexes: ['endpoint', 'tenantId', 'clientId', 'createdAt'] };

export type Outcome = 'allow' | 'deny' | 'error';

/** An entry as written by the audit middleware; the log adds id and createdAt. */
export interface AuditFields {
  endpoint: string;
  method: string;
  requestSummary: Record<string, unknown>;
  policyInput: unknown;
  policyDecision: unknown;
  outcome: Outcome;
  tenantId: string | null;
  clientId: string | null;
  subjectId: string | null;
  ip: string | null;
  userAgent: string | null;
  /** The request's X-Request-ID (the caller's, or generated), as in its log lines. */
  requestId: string | null;
}

export type AuditEntry = AuditFields & StoredDoc & { id: number; createdAt: string };

export interface AuditPageQuery {
  filter: { endpoint?: string; tenantId?: string | null; clientId?: string };
  page: number;
  size: number;
  sort: { field: string; direction: 'asc' | 'desc' };
}

export interface AuditPage {
  content: AuditEntry[];
  totalElements: number;
  totalPages: number;
  number: number;
  size: number;
}

export const SORTABLE_FIELDS = ['id', 'createdAt', 'endpoint', 'method', 'outcome', 'tenantId', 'clientId', 'subjectId'];

/** The append-only audit log. Entries of every tenant share one collection and carry their tenantId. */
/** How many audit ids one node reserves at a time. */
const AUDIT_ID_BLOCK = 100;

export class AuditLog {
  private readonly entries: TenantCollection<AuditEntry>;
  private ids = { next: 1, last: 0 };
  private reserving: Promise<void> | null = null;

  constructor(private readonly store: Store) {
    this.entries = store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
  }

  async append(entry: AuditFields): Promise<AuditEntry> {
    const id = await this.nextId();
    return this.entries.insert({ ...entry, id, createdAt: new Date().toISOString() });
  }

  /**
   * Ids come from blocks of the store's sequence reserved ahead, so an entry costs one write
   * rather than two. Ids stay unique across nodes and rising within a node; a crash leaves a gap.
   */
  private async nextId(): Promise<number> {
    while (this.ids.next > this.ids.last) {
      this.reserving ??= this.store
        .nextSequence('audit_logs', AUDIT_ID_BLOCK)
        .then((last) => {
          this.ids = { next: last - AUDIT_ID_BLOCK + 1, last };
        })
        .finally(() => {
          this.reserving = null;
        });
      await this.reserving;
    }
    return this.ids.next++;
  }

  async get(id: number): Promise<AuditEntry | null> {
    return this.entries.get(id);
  }

  async page(query: AuditPageQuery): Promise<AuditPage> {
    const filter: Filter = Object.fromEntries(Object.entries(query.filter).filter(([, value]) => value !== undefined)) as Filter;
    const [content, totalElements] = await Promise.all([
      this.entries.find(filter, { sort: query.sort, skip: query.page * query.size, limit: query.size }),
      this.entries.count(filter),
    ]);
    return { content, totalElements, totalPages: Math.ceil(totalElements / query.size), number: query.page, size: query.size };
  }
}
