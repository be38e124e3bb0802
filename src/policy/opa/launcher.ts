/**
 * Where opa CLI commands are started: a small Node.js process of this one's (the launcher,
 * launcher-process.ts), not the server itself. Starting a process forks its parent, and a fork
 * copies the parent's page tables on the event loop: about 20 ms for a server of 250 MB resident,
 * 40 ms at 600 MB, for every policy validation, trial and Wasm build. The launcher, tens of MB,
 * starts each in a millisecond or two, off the server's event loop. It is started at the first
 * run, holds no secret (an empty environment; each run gets the sandbox's own), and ends with this
 * process; when it is lost, the runs under way end `lost` and the next run starts a new one.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { threadModule } from '../../config/index.js';
import type { LaunchJob } from './launcher-process.js';
import type { RunLimits, RunOutcome } from './run-to-completion.js';

/** How long after a run's own time limit its answer may take before the launcher counts as lost. */
const ANSWER_GRACE_MS = 5_000;
/** How long a lost launcher has to kill its runs and exit before it is killed. */
const EXIT_GRACE_MS = 1_000;

export type LaunchOutcome = RunOutcome | { kind: 'lost'; reason: string };

interface Pending {
  resolve(outcome: LaunchOutcome): void;
  timer: NodeJS.Timeout;
}

export class OpaLauncher {
  private child: ChildProcess | null = null;
  private nextId = 0;
  private readonly pending = new Map<number, Pending>();

  /** Runs `binary` with `args` in the launcher, in environment `env`, under `limits`. */
  run(binary: string, args: string[], env: NodeJS.ProcessEnv, limits: RunLimits): Promise<LaunchOutcome> {
    const child = this.child ?? this.start();
    const id = ++this.nextId;
    return new Promise((resolve) => {
      const waitMs = limits.timeoutMs + ANSWER_GRACE_MS;
      const timer = setTimeout(() => this.lose(child, `the OPA launcher gave no answer within ${waitMs} ms`), waitMs);
      this.pending.set(id, { resolve, timer });
      // While a run is under way the channel keeps this process alive; idle, it does not.
      child.channel?.ref();
      const job: LaunchJob = { id, binary, args, env, limits };
      child.send(job, (error) => {
        if (error) this.lose(child, `the OPA launcher could not be reached (${error.message})`);
      });
    });
  }

  private start(): ChildProcess {
    const { module, execArgv } = threadModule(import.meta.url, 'launcher-process');
    const child = fork(fileURLToPath(module), [], {
      execArgv,
      env: {},
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child.on('message', (message: { id: number; outcome: RunOutcome }) => this.settle(message.id, message.outcome));
    child.on('error', (error) => this.lose(child, `the OPA launcher failed (${error.message})`));
    child.once('exit', (code, signal) => this.lose(child, `the OPA launcher exited (${signal ?? `code ${code}`})`));
    child.unref();
    child.channel?.unref();
    this.child = child;
    return child;
  }

  private settle(id: number, outcome: LaunchOutcome): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    clearTimeout(pending.timer);
    this.pending.delete(id);
    if (this.pending.size === 0) this.child?.channel?.unref();
    pending.resolve(outcome);
  }

  /** Ends every run under way as `lost` and lets the launcher go: its runs are killed as it exits. */
  private lose(child: ChildProcess, reason: string): void {
    if (this.child !== child) return;
    this.child = null;
    for (const id of [...this.pending.keys()]) this.settle(id, { kind: 'lost', reason });
    if (child.exitCode !== null || child.signalCode !== null) return;
    if (child.connected) child.disconnect();
    setTimeout(() => child.kill('SIGKILL'), EXIT_GRACE_MS).unref();
  }
}
