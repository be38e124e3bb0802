/**
 * One opa CLI command run to completion under its limits: killed past its time or its resident
 * memory, its output cut off (and the run killed) past MAX_OUTPUT_BYTES. Runs in the OPA launcher
 * process (launcher.ts), so it imports nothing but Node's own modules.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';

/** What a run writes to stdout or stderr beyond this is cut off and the run killed (it then fails). */
const MAX_OUTPUT_BYTES = 4 * 1024 * 1024;
/** How often a run's resident memory is read. */
const MEMORY_CHECK_MS = 50;

export interface RunLimits {
  timeoutMs: number;
  memoryBytes: number;
}

export interface CompletedRun {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** How a run ended: completed (whatever its exit code), stopped at a limit, or never started. */
export type RunOutcome =
  | { kind: 'completed'; run: CompletedRun }
  | { kind: 'stopped'; limit: string }
  | { kind: 'not-started'; reason: string };

/** The children running now, killed when the launcher ends. */
const running = new Set<ReturnType<typeof spawn>>();

export function killEveryRun(): void {
  for (const child of running) child.kill('SIGKILL');
}

export function runToCompletion(
  binary: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  limits: RunLimits,
): Promise<RunOutcome> {
  return new Promise((resolve) => {
    const child = spawn(binary, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    const stdout = new OutputBuffer(() => child.kill('SIGKILL'));
    const stderr = new OutputBuffer(() => child.kill('SIGKILL'));
    child.stdout.on('data', (chunk: Buffer) => stdout.add(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.add(chunk));
    let stoppedAt: string | null = null;
    const stop = (limit: string) => {
      stoppedAt ??= limit;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(
      () => stop(`it ran longer than POLICY_OPA_TIMEOUT_MS (${limits.timeoutMs} ms)`),
      limits.timeoutMs,
    );
    const watcher = setInterval(() => {
      void residentBytes(child.pid).then((bytes) => {
        if (bytes > limits.memoryBytes)
          stop(`it used more than POLICY_OPA_MEMORY_MB (${Math.floor(limits.memoryBytes / 1024 / 1024)} MB)`);
      });
    }, MEMORY_CHECK_MS);
    const done = () => {
      clearTimeout(timer);
      clearInterval(watcher);
      running.delete(child);
    };
    child.once('error', (error: NodeJS.ErrnoException) => {
      done();
      resolve({ kind: 'not-started', reason: error.code ?? error.message });
    });
    child.once('close', (code) => {
      done();
      if (stoppedAt) resolve({ kind: 'stopped', limit: stoppedAt });
      else resolve({ kind: 'completed', run: { exitCode: code ?? 1, stdout: stdout.text(), stderr: stderr.text() } });
    });
  });
}

/** A stream's output up to MAX_OUTPUT_BYTES; `overflow` is called once when it would be more. */
class OutputBuffer {
  private readonly chunks: Buffer[] = [];
  private bytes = 0;
  constructor(private readonly overflow: () => void) {}
  add(chunk: Buffer): void {
    if (this.bytes + chunk.length > MAX_OUTPUT_BYTES) {
      if (this.bytes <= MAX_OUTPUT_BYTES) this.overflow();
      this.bytes = MAX_OUTPUT_BYTES + 1;
      return;
    }
    this.bytes += chunk.length;
    this.chunks.push(chunk);
  }
  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/** The process's resident memory (VmRSS of /proc/<pid>/status); 0 where /proc cannot tell (GOMEMLIMIT still applies). */
async function residentBytes(pid: number | undefined): Promise<number> {
  if (!pid) return 0;
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kilobytes = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  return kilobytes ? Number(kilobytes) * 1024 : 0;
}
