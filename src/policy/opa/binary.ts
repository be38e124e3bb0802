import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectPath } from '../../config/index.js';

/** Where scripts/install-opa.sh puts the pinned OPA (GOBIN=<repo>/.bin). */
export const PROJECT_OPA = projectPath('.bin', 'opa');

/** config.opaBin when set, else the project's .bin/opa when it exists, else `opa` from PATH. */
export function resolveOpaBinary(configured: string | null): string {
  if (configured) return configured;
  try {
    accessSync(PROJECT_OPA, constants.X_OK);
    return PROJECT_OPA;
  } catch {
    return 'opa';
  }
}

export interface OpaRun {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Runs an opa CLI command to completion; rejects only when the binary cannot be started. */
export function runOpa(binary: string, args: string[], timeoutMs = 15_000): Promise<OpaRun> {
  return new Promise((resolve, reject) => {
    execFile(binary, args, { timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = (error as NodeJS.ErrnoException | null)?.code;
      if (code === 'ENOENT' || code === 'EACCES') {
        reject(new Error(`cannot run ${binary} (${code}); run scripts/install-opa.sh or set OPA_BIN`));
        return;
      }
      const exitCode = error ? (typeof code === 'number' ? code : 1) : 0;
      resolve({ exitCode, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** Runs `work` in a fresh scratch directory for the files an opa command reads and writes; the directory is removed afterwards, whatever happens. */
export async function inScratchDirectory<T>(prefix: string, work: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  try {
    return await work(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** What a failed opa command said, without the scratch paths (`<path>/`, in the order given) in front of file names. */
export function opaMessage(run: OpaRun, ...paths: string[]): string {
  return paths.reduce((message, path) => message.replaceAll(`${path}/`, ''), run.stderr || run.stdout).trim();
}
