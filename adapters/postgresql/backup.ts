import { createReadStream, createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { once } from 'node:events';
import type pg from 'pg';
import { PHYSICAL_PREFIX, assertFieldName, physicalName } from '../shared/spec.js';

/**
 * A backup of a PostgreSQL store as a file of JSON lines: a header, then one line per row of every
 * Arbiter table (the collections' `c_*`, `sequences`, `window_counters`). Read in one REPEATABLE
 * READ transaction, so the copy is consistent while the nodes keep writing; rows are read in pages
 * (keyset on the primary key), so memory stays bounded however large the store. A restore replaces
 * every Arbiter table of the schema with the file's rows, in one transaction.
 */
const FORMAT = 'arbiter-postgresql-backup';
const VERSION = 1;
const PAGE = 1000;

interface Header {
  format: string;
  version: number;
}

/** One row of a collection table. */
interface DocumentLine {
  table: string;
  tenant: string;
  id: string;
  doc: unknown;
  expires_at: string | null;
}

type Line = DocumentLine | { sequence: string; value: string } | { counter: string; count: string; reset_at: string };

/** Writes every Arbiter table of the connection's schema to `destination` (created owner-only). */
export async function writeBackup(client: pg.PoolClient, destination: string): Promise<void> {
  const out = createWriteStream(destination, { mode: 0o600, flags: 'wx' });
  const write = async (line: object) => {
    if (!out.write(`${JSON.stringify(line)}\n`)) await once(out, 'drain');
  };
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await write({ format: FORMAT, version: VERSION } satisfies Header);
    for (const row of (await client.query<{ name: string; value: string }>('SELECT name, value FROM sequences')).rows)
      await write({ sequence: row.name, value: row.value });
    for (const row of (
      await client.query<{ key: string; count: string; reset_at: string }>(
        'SELECT key, count, reset_at FROM window_counters',
      )
    ).rows)
      await write({ counter: row.key, count: row.count, reset_at: row.reset_at });
    for (const table of await collectionTables(client)) {
      let after: [string, string] = ['', ''];
      for (;;) {
        const { rows } = await client.query<Omit<DocumentLine, 'table'>>(
          `SELECT tenant, id, doc, expires_at FROM "${table}" WHERE (tenant, id) > ($1, $2) ORDER BY tenant, id LIMIT ${PAGE}`,
          after,
        );
        for (const row of rows) await write({ table, ...row });
        if (rows.length < PAGE) break;
        const last = rows.at(-1)!; // a full page
        after = [last.tenant, last.id];
      }
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    out.end();
    await once(out, 'close');
  }
}

/**
 * Replaces every Arbiter table of the connection's schema by the backup's rows, in one transaction
 * (a backup that is not one, or breaks off, changes nothing). `createTable` makes a collection table
 * as the store does; its indexes are made when the store next opens it.
 */
export async function readBackup(
  client: pg.PoolClient,
  backupFile: string,
  createTable: (table: string) => string,
): Promise<void> {
  const created = new Set<string>();
  let emptied = false;
  const emptyStore = async () => {
    for (const table of await collectionTables(client)) await client.query(`DROP TABLE "${table}"`);
    await client.query('DELETE FROM sequences');
    await client.query('DELETE FROM window_counters');
    emptied = true;
  };
  await client.query('BEGIN');
  try {
    await client.query("SELECT pg_advisory_xact_lock(hashtext('arbiter store ddl'))");
    for await (const line of backupLines(backupFile)) {
      if (!emptied) await emptyStore();
      if ('sequence' in line)
        await client.query('INSERT INTO sequences (name, value) VALUES ($1, $2)', [line.sequence, line.value]);
      else if ('counter' in line)
        await client.query('INSERT INTO window_counters (key, count, reset_at) VALUES ($1, $2, $3)', [
          line.counter,
          line.count,
          line.reset_at,
        ]);
      else {
        if (!line.table.startsWith(PHYSICAL_PREFIX)) throw new Error(`${backupFile}: a row of table ${line.table}`);
        assertFieldName(line.table);
        if (!created.has(line.table)) {
          await client.query(createTable(line.table));
          created.add(line.table);
        }
        await client.query(`INSERT INTO "${line.table}" (tenant, id, doc, expires_at) VALUES ($1, $2, $3, $4)`, [
          line.tenant,
          line.id,
          JSON.stringify(line.doc),
          line.expires_at,
        ]);
      }
    }
    // A backup of an empty store: a header and no line.
    if (!emptied) await emptyStore();
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

function parseHeader(text: string, backupFile: string): Header {
  let header: Partial<Header> = {};
  try {
    header = JSON.parse(text) as Partial<Header>;
  } catch {
    // Said below.
  }
  if (header.format !== FORMAT)
    throw new Error(`${backupFile} is not an Arbiter PostgreSQL backup (npx arbiter backup on a postgres:// store)`);
  if (header.version !== VERSION) throw new Error(`${backupFile} is a backup of format version ${header.version}`);
  return header as Header;
}

async function collectionTables(client: pg.PoolClient): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    'SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() AND starts_with(tablename, $1) ORDER BY 1',
    [PHYSICAL_PREFIX],
  );
  return rows.map((row) => row.name);
}

/** One document of a backup file (writeBackup's output), read without restoring anything; null when absent. */
export async function documentInBackup(
  backupFile: string,
  collection: string,
  tenant: string,
  id: string,
): Promise<unknown> {
  const table = physicalName(collection);
  for await (const line of backupLines(backupFile))
    if ('table' in line && line.table === table && line.tenant === tenant && line.id === id) return line.doc;
  return null;
}

/**
 * The lines of a backup file after its header, parsed: a file whose first line is not a backup's
 * header, or that holds none, throws before any line is given.
 */
async function* backupLines(backupFile: string): AsyncGenerator<Line> {
  // Made as the loop starts reading it: lines read before `for await` starts would be lost.
  const lines = createInterface({ input: createReadStream(backupFile, 'utf8'), crlfDelay: Infinity });
  let header: Header | null = null;
  for await (const text of lines) {
    if (!text) continue;
    if (header) yield JSON.parse(text) as Line;
    else header = parseHeader(text, backupFile);
  }
  if (!header) throw new Error(`${backupFile} is empty: not an Arbiter PostgreSQL backup`);
}
