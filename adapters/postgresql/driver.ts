import { createRequire } from 'node:module';
import type pg from 'pg';

let driver: typeof pg | undefined;

/**
 * The PostgreSQL driver (CommonJS, hence require), loaded when a PostgreSQL store is opened, not
 * by every process that could open one (the CLI, a server or a test worker on SQLite).
 */
export function pgDriver(): typeof pg {
  driver ??= createRequire(import.meta.url)('pg') as typeof pg;
  return driver;
}
