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
  /**
   * Set on a read the operators' console made for itself (see CONSOLE_HEADER): an Admin API GET
   * with a valid key that succeeded. Absent on everything else, every write included.
   */
  consoleRead?: true;
}

/** An entry as stored: its fields, with the id and the time the log gave it. */
export type AuditEntry = AuditFields & StoredDoc & { id: number; createdAt: string };

/**
 * The header the operators' console sends with its own reads. It only marks an entry, so that the
 * audit log's list can leave the console's page loads out (hideConsoleReads=true); it hides
 * nothing by itself, and it marks only a successful GET made with a valid Admin API key: a write,
 * a refused call or a call without a valid key is never marked, whoever sends the header.
 */
export const CONSOLE_HEADER = 'x-arbiter-console';
