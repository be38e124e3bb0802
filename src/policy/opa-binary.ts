import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Where scripts/install-opa.sh puts the pinned OPA (GOBIN=<repo>/.bin). */
export const PROJECT_OPA = fileURLToPath(new URL('../../.bin/opa', import.meta.url));

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
