/**
 * The scratch files of the opa commands a process runs (a candidate rule or bundle, a replay's
 * recorded inputs, the capabilities file) hold policy code and data. They are kept in one folder per
 * process, named after its pid, so that what a process killed in the middle of its work (SIGKILL,
 * the OOM killer) leaves is found by that name and removed at a later start.
 */
import { rmSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SCRATCH_FOLDER_PREFIX = 'arbiter-scratch-';

function scratchFolderOf(pid: number): string {
  return join(tmpdir(), `${SCRATCH_FOLDER_PREFIX}${pid}`);
}

async function freshDirectory(prefix: string): Promise<string> {
  return mkdtemp(join(await ownFolder(), prefix));
}

/**
 * The process's folder, `arbiter-scratch-<pid>`, when it is its own: a directory (not a link)
 * that this user owns and nobody else may enter. In a temporary directory other users share
 * (/tmp), one of them may have made that name first, to swap the capabilities file that confines
 * policy code, or read the bundles checked there: then the process takes a folder of its own
 * under a name nobody can guess, `arbiter-scratch-<pid>-XXXXXX`.
 */
async function ownFolder(): Promise<string> {
  const named = scratchFolderOf(process.pid);
  await mkdir(named, { recursive: true, mode: 0o700 });
  if (await isPrivateDirectory(named)) return named;
  const existing = (await readdir(tmpdir())).find(
    (name) => name.startsWith(`${SCRATCH_FOLDER_PREFIX}${process.pid}-`) && name.length > named.length,
  );
  if (existing && (await isPrivateDirectory(join(tmpdir(), existing)))) return join(tmpdir(), existing);
  return mkdtemp(`${named}-`);
}

async function isPrivateDirectory(path: string): Promise<boolean> {
  const found = await lstat(path);
  return found.isDirectory() && found.uid === process.getuid?.() && (found.mode & 0o077) === 0;
}

/**
 * Runs `work` in a fresh scratch directory for the files an opa command reads and writes; the
 * directory is removed afterwards, whatever happens, or by a later start when this process is
 * killed meanwhile.
 */
export async function inScratchDirectory<T>(prefix: string, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = await freshDirectory(prefix);
  try {
    return await work(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A scratch directory kept as long as this process runs (files written once and read by every opa
 * command); removed when it exits, or by a later start when it is killed.
 */
export async function processScratchDirectory(prefix: string): Promise<string> {
  const dir = await freshDirectory(prefix);
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Removes the scratch folders of processes that are no longer running, with whatever they were
 * killed in the middle of; those of live processes (other servers on the machine, this one) stay.
 * Returns the pids whose folders were removed.
 */
export async function removeScratchOfEndedProcesses(): Promise<number[]> {
  const entries = await readdir(tmpdir()).catch(() => [] as string[]);
  const ended = new Set<number>();
  for (const name of entries.filter((entry) => entry.startsWith(SCRATCH_FOLDER_PREFIX))) {
    // `arbiter-scratch-<pid>`, or `arbiter-scratch-<pid>-XXXXXX` (ownFolder).
    const pid = Number(/^(\d+)(?:-[^-]+)?$/.exec(name.slice(SCRATCH_FOLDER_PREFIX.length))?.[1]);
    if (!Number.isInteger(pid) || pid <= 0 || isAlive(pid)) continue;
    // Another user's folder (a shared /tmp) is theirs to remove.
    await rm(join(tmpdir(), name), { recursive: true, force: true }).catch(() => undefined);
    ended.add(pid);
  }
  return [...ended];
}

/** Whether a process with this pid runs (EPERM: it does, as another user). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
