import type { StoredDoc } from '../store/index.js';

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

/** An entry as stored: its fields, with the id and the time the log gave it. */
export type AuditEntry = AuditFields & StoredDoc & { id: number; createdAt: string };
