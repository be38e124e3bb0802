import { chmodSync, existsSync, mkdirSync, readdirSync, rmSync, statfsSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/** Where the suite's scratch goes when the machine has it: a file system in memory (tmpfs). */
const MEMORY_SCRATCH = '/dev/shm';

/** statfs's f_type of tmpfs (TMPFS_MAGIC, linux/magic.h). */
const TMPFS_MAGIC = 0x01021994;

/** Below this much free space in MEMORY_SCRATCH the suite keeps the system's temporary directory. */
const MIN_FREE_BYTES = 2 * 1024 ** 3;

const PREFIX = 'arbiter-suite-';

/** The environment variable that keeps the TMPDIR the run was started with ('' for none). */
export const GIVEN_TMPDIR = 'ARBITER_TEST_GIVEN_TMPDIR';

/**
 * A run's directory is removed by a later run, once its process is gone and it has not changed for
 * this long: the workers of a run close their fixtures (PostgreSQL clusters stopped through their
 * data directory) for up to a minute after the run's main process ends.
 */
const LEFT_ALONE_MS = 5 * 60_000;

/**
 * Points TMPDIR (os.tmpdir(), read at each call) at a directory of this run in memory, for this
 * process and every process it starts after: the test servers' SQLite files, the PostgreSQL
 * clusters, OPA's and Chromium's folders. On a disk each of their fsyncs (a checkpoint every
 * 200 ms per SQLite store, PostgreSQL's commits) costs the journal's work in the kernel, and no
 * test asserts anything of a disk: a SIGKILLed process loses what a tmpfs holds no more than
 * what the page cache holds. Left alone when TMPDIR is set (the caller's choice, or the run's
 * main process made it already) or the machine has no roomy tmpfs. Returns the directory made.
 */
export function scratchInMemory(): string | null {
  // What the run was given, kept for its processes (test/unit/support/scratch.test.ts).
  process.env[GIVEN_TMPDIR] ??= process.env.TMPDIR ?? '';
  if (process.env.TMPDIR || !memoryScratchUsable()) return null;
  removeEndedRuns();
  const directory = join(MEMORY_SCRATCH, `${PREFIX}${process.pid}`);
  rmSync(directory, { recursive: true, force: true });
  mkdirSync(directory);
  // As /tmp: PostgreSQL's clusters run as another user (scripts/postgresql.sh) and make their directories here.
  chmodSync(directory, 0o1777);
  shareTsxCache(directory, tmpdir());
  process.env.TMPDIR = directory;
  return directory;
}

/**
 * tsx keeps the modules it transformed in `<os.tmpdir()>/tsx-<uid>`, the directory it reads once as
 * it loads. Without this link the run's workers would each start from an empty cache in the run's
 * directory, and the serial pass (a mocha of its own, whose tsx loaded before its root hook ran)
 * would miss what the parallel pass transformed and compile every module it loads again (loading
 * the serial files: 4.1 s of CPU instead of 2.6, docs/development.md). The link gives the workers
 * the cache of the machine's temporary directory, the one the serial pass reads.
 */
function shareTsxCache(runDirectory: string, machineTemporary: string): void {
  const name = tsxCacheName();
  const cache = join(machineTemporary, name);
  mkdirSync(cache, { recursive: true, mode: 0o700 });
  symlinkSync(cache, join(runDirectory, name));
}

/** The name tsx gives its cache directory: by the effective user id (its user name where there is none). */
export function tsxCacheName(): string {
  return `tsx-${process.geteuid ? process.geteuid() : userInfo().username}`;
}

/** Whether the machine has MEMORY_SCRATCH as a tmpfs with room to spare. */
export function memoryScratchUsable(): boolean {
  return isTmpfs(MEMORY_SCRATCH, MIN_FREE_BYTES);
}

/** Whether `path` is on a tmpfs with at least `freeBytes` available. */
export function isTmpfs(path: string, freeBytes = 0): boolean {
  try {
    const stats = statfsSync(path);
    return stats.type === TMPFS_MAGIC && stats.bavail * stats.bsize >= freeBytes;
  } catch {
    return false;
  }
}

function removeEndedRuns(): void {
  for (const name of readdirSync(MEMORY_SCRATCH).filter((each) => each.startsWith(PREFIX))) {
    const path = join(MEMORY_SCRATCH, name);
    const owner = Number(name.slice(PREFIX.length));
    const quietFor = Date.now() - (statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
    // /proc/<pid> exists while the process does (this only runs where /dev/shm is a tmpfs: Linux).
    if (Number.isInteger(owner) && !existsSync(`/proc/${owner}`) && quietFor > LEFT_ALONE_MS)
      rmSync(path, { recursive: true, force: true });
  }
}
