import { assertFieldName } from '../shared/spec.js';

/** Arbiter's own settings of a PostgreSQL store, read from STORE_URL's parameters (taken out before the rest goes to `pg`). */
export interface PostgresSettings {
  /** The URL without Arbiter's parameters: what `pg` connects with. */
  connectionString: string;
  /** `schema`: the schema that holds Arbiter's tables (made when missing); the connection's search_path otherwise (`public`). */
  schema: string | null;
  /** `pool_size`: connections per node (default 10). Every node opens its own: size PostgreSQL's max_connections for all of them. */
  poolSize: number;
  /** `connect_timeout_ms`: how long a statement waits for a connection of the pool, a new one included (default 2000). */
  connectTimeoutMs: number;
  /** `statement_timeout_ms`: how long a statement may take, on the server and awaited by the client (default 2500). */
  statementTimeoutMs: number;
}

const DEFAULTS = { poolSize: 10, connectTimeoutMs: 2000, statementTimeoutMs: 2500 };

/** Parses STORE_URL=postgres://…; throws an Error that names a bad setting. */
export function settingsOf(url: string): PostgresSettings {
  const queryAt = url.indexOf('?');
  const query = new URLSearchParams(queryAt < 0 ? '' : url.slice(queryAt + 1));
  const take = (name: string): string | null => {
    const value = query.get(name);
    query.delete(name);
    return value;
  };
  const number = (name: string, fallback: number, min: number, max: number): number => {
    const text = take(name);
    if (text === null) return fallback;
    const value = Number(text);
    if (!Number.isInteger(value) || value < min || value > max)
      throw new Error(`STORE_URL: ${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`);
    return value;
  };
  const schema = take('schema');
  if (schema !== null) assertFieldName(schema);
  const settings = {
    schema,
    poolSize: number('pool_size', DEFAULTS.poolSize, 1, 1000),
    connectTimeoutMs: number('connect_timeout_ms', DEFAULTS.connectTimeoutMs, 100, 60_000),
    statementTimeoutMs: number('statement_timeout_ms', DEFAULTS.statementTimeoutMs, 100, 600_000),
  };
  const rest = query.toString();
  const base = queryAt < 0 ? url : url.slice(0, queryAt);
  return { connectionString: rest ? `${base}?${rest}` : base, ...settings };
}
