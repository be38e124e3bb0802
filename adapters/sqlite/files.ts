import { accessSync, constants, statSync } from 'node:fs';

/**
 * The one check of the store's files, shared by the store (StoreFiles in index.ts, before its
 * statements) and the checkpointer's thread (checkpointer-thread.ts, before each checkpoint):
 * is a path still the file that was opened, and can it still be written.
 */

/** Identity of one file, as the kernel knows it: a deleted or replaced file gets another. */
export interface FileIdentity {
  path: string;
  dev: number;
  ino: number;
}

/** The file at `path` now, or null when there is none. */
export function identityOf(path: string): FileIdentity | null {
  const stats = statSync(path, { throwIfNoEntry: false });
  return stats ? { path, dev: stats.dev, ino: stats.ino } : null;
}

/** What became of an opened file: null while its path still names it. */
export function changeOf(file: FileIdentity): 'missing' | 'replaced' | null {
  const now = identityOf(file.path);
  if (!now) return 'missing';
  return now.dev === file.dev && now.ino === file.ino ? null : 'replaced';
}

/**
 * Why the file at `path` cannot be read and written (the error code of access(2): EPERM for an
 * immutable file, EROFS on a read-only file system, ENOENT when it is gone), or null when it can.
 */
export function unwritableCode(path: string): string | null {
  try {
    accessSync(path, constants.R_OK | constants.W_OK);
    return null;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? 'error';
  }
}
