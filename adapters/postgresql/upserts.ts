import type pg from 'pg';
import { BatchWriter } from '../../src/store/batches.js';
import { physicalName } from '../shared/spec.js';

/** One row of an upsert: its tenant, id, document (as jsonb text, checked) and expiry. */
export interface UpsertRow {
  tenant: string;
  id: string;
  json: string;
  expiresAt: number | null;
}

/** What an upsert of a batch came to: stored, or its own error (a row tried alone after its batch was refused). */
export const UPSERTED = Symbol('upserted');
export type UpsertOutcome = typeof UPSERTED | { error: unknown };

interface Pending {
  row: UpsertRow;
  /** The row's upsert as a statement of its own, for when its batch was refused. */
  alone(): Promise<unknown>;
}

/** Rows at most per statement: a batch's parameter is their documents, 1–2 KB each for tokens. */
const MAX_ROWS = 128;

type Query = (text: string, values: unknown[]) => Promise<pg.QueryResult>;

/**
 * The upserts of one node's requests to one table gathered into one statement (BatchWriter: the
 * rows added while the previous statement of the table was under way, or in the same event-loop
 * turn): under load each token was its own INSERT, i.e. its own commit, and the largest cost
 * PostgreSQL had per token. A statement commits all its rows or none, and each caller is answered
 * only after it committed: the durability of one statement per row.
 *
 * The rows travel as one jsonb array, so that every batch is one prepared statement whatever its
 * size. Two upserts of one row in a batch (concurrent callers) keep the later one, as one after the
 * other would: PostgreSQL refuses to change a row twice in one statement. A batch that fails with
 * a connection fault fails every caller (503); one refused for another reason (a unique key of one
 * row) is tried row by row, so that each caller has its own answer.
 */
export class UpsertBatches {
  private readonly writers = new Map<string, BatchWriter<Pending, UpsertOutcome>>();

  constructor(
    private readonly query: Query,
    /** True for an error that says the server is unreachable (nothing is to be tried row by row then). */
    private readonly isConnectionFault: (error: unknown) => boolean,
  ) {}

  add(collection: string, row: UpsertRow, alone: () => Promise<unknown>): Promise<UpsertOutcome> {
    let writer = this.writers.get(collection);
    if (!writer) {
      const statement = upsertStatement(`"${physicalName(collection)}"`);
      writer = new BatchWriter<Pending, UpsertOutcome>({
        write: (batch) => this.write(statement, batch),
        maxItems: MAX_ROWS,
        // Each caller is answered with the error (a 503 for a connection fault) and logs it.
        onFailure: () => {},
      });
      this.writers.set(collection, writer);
    }
    return writer.add({ row, alone });
  }

  async close(): Promise<void> {
    await Promise.all([...this.writers.values()].map((writer) => writer.close()));
  }

  private async write(statement: string, batch: Pending[]): Promise<UpsertOutcome[]> {
    try {
      await this.query(statement, [rowsJson(batch.map((pending) => pending.row))]);
      return batch.map(() => UPSERTED);
    } catch (error) {
      if (this.isConnectionFault(error)) throw error;
    }
    const outcomes: UpsertOutcome[] = [];
    for (const pending of batch) {
      outcomes.push(
        await pending.alone().then(
          (): UpsertOutcome => UPSERTED,
          (error: unknown) => ({ error }),
        ),
      );
    }
    return outcomes;
  }
}

/** The rows as one jsonb array of `[tenant, id, doc, expiresAt]`, the last upsert of each row only, in key order. */
function rowsJson(rows: readonly UpsertRow[]): string {
  const latest = new Map<string, UpsertRow>();
  for (const row of rows) {
    latest.set(JSON.stringify([row.tenant, row.id]), row);
  }
  // In key order: two nodes' batches that share rows lock them in the same order, so never deadlock
  // (the rows of one batch came concurrently: any order among them is one they could have had).
  const entries = [...latest.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, row]) => `${key.slice(0, -1)},${row.json},${row.expiresAt === null ? 'null' : row.expiresAt}]`);
  return `[${entries.join(',')}]`;
}

/** Rows in the array's order (insertion order, `seq`, is the tie-breaker of sorts). */
function upsertStatement(table: string): string {
  return `INSERT INTO ${table} (tenant, id, doc, expires_at)
    SELECT r->>0, r->>1, r->2, (r->>3)::bigint FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS rows(r, n) ORDER BY n
    ON CONFLICT (tenant, id) DO UPDATE SET doc = excluded.doc, expires_at = excluded.expires_at`;
}
