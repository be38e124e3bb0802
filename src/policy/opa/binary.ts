import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { projectPath } from '../../config/index.js';
import {
  capabilitiesFileOf,
  cliEnvironment,
  explainForbiddenBuiltins,
  policySandboxLimits,
  withCapabilities,
  type PolicySandboxLimits,
} from './sandbox.js';
import { OpaLauncher } from './launcher.js';
import type { CompletedRun } from './run-to-completion.js';

/** Where scripts/install-opa.sh puts the pinned OPA (GOBIN=<repo>/.bin). */
export const PROJECT_OPA = projectPath('.bin', 'opa');

/**
 * config.opaBin when set, else the project's .bin/opa when it exists, else `opa` from PATH; a
 * bare name is looked up in the server's PATH here, as OPA's processes get no PATH of their own.
 */
export function resolveOpaBinary(configured: string | null): string {
  if (configured) return absolutePath(configured);
  try {
    accessSync(PROJECT_OPA, constants.X_OK);
    return PROJECT_OPA;
  } catch {
    return absolutePath('opa');
  }
}

/** A run that completed, whatever its exit code: what it wrote to stdout and stderr. */
export type OpaRun = CompletedRun;

/**
 * No OPA run was free within the wait, or the launcher was lost during the run: a 503 for the
 * caller to retry (an Unavailable, see src/http/errors.ts, recognised by its shape).
 */
export class OpaBusyError extends Error {
  readonly status = 503;
  readonly error = 'temporarily_unavailable';
  readonly dependency = 'policy evaluation';
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'OpaBusyError';
  }
}

/** The OPA binary cannot be started (not installed, not executable). */
export class OpaNotFoundError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OpaNotFoundError';
  }
}

/** A run killed at a limit (time, memory): the code it ran is too costly, the message names the limit. */
export class OpaLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OpaLimitError';
  }
}

/**
 * Runs an opa CLI command to completion in the sandbox (sandbox.ts): the capabilities file
 * of this binary on every command that compiles Rego, an environment of its own, at most
 * `concurrency` runs at once in this process, killed past the time or memory limit. Rejects
 * when the binary cannot be started, with OpaBusyError when no run is free within the wait,
 * with OpaLimitError when the run was killed at a limit.
 */
export async function runOpa(binary: string, args: string[], lane: OpaLane = 'submitted'): Promise<OpaRun> {
  const executable = absolutePath(binary);
  const capabilities = await capabilitiesFileOf(executable).catch((error: Error) => {
    throw new OpaNotFoundError(error.message);
  });
  const limits = policySandboxLimits();
  const release = await opaSlots[lane].acquire(limits);
  try {
    return await runSandboxed(executable, withCapabilities(args, capabilities), limits);
  } finally {
    release();
  }
}

/** Every opa command of this process starts in the launcher (launcher.ts), off the event loop. */
const launcher = new OpaLauncher();

async function runSandboxed(
  binary: string,
  args: string[],
  limits: Pick<PolicySandboxLimits, 'timeoutMs' | 'memoryBytes'>,
): Promise<OpaRun> {
  const outcome = await launcher.run(binary, args, cliEnvironment(limits.memoryBytes), limits);
  switch (outcome.kind) {
    case 'completed':
      return outcome.run;
    case 'stopped':
      throw new OpaLimitError(`OPA was stopped: ${outcome.limit}`);
    case 'not-started':
      throw new OpaNotFoundError(`cannot run ${binary} (${outcome.reason}); run scripts/install-opa.sh or set OPA_BIN`);
    case 'lost':
      throw new OpaBusyError(`policy evaluation is unavailable, retry: ${outcome.reason}`);
  }
}

/** A bare command name as found in the server's PATH (unchanged when it is not there, or is a path already). */
function absolutePath(binary: string): string {
  if (binary.includes('/')) return binary;
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const candidate = join(dir, binary);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this folder
    }
  }
  return binary;
}

/** At most `concurrency` OPA runs at once in this process; the others wait their turn, at most `queueWaitMs`. */
class RunSlots {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  async acquire(limits: { concurrency: number; queueWaitMs: number }): Promise<() => void> {
    if (this.running >= limits.concurrency) await this.waitForTurn(limits);
    else this.running += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      // The slot passes straight to the next waiter, so the count stays as it is.
      if (next) next();
      else this.running -= 1;
    };
  }

  private waitForTurn(limits: { concurrency: number; queueWaitMs: number }): Promise<void> {
    return new Promise((resolve, reject) => {
      const turn = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(turn), 1);
        reject(
          new OpaBusyError(
            `policy evaluation is busy, retry: ${limits.concurrency} OPA runs at once (POLICY_OPA_CONCURRENCY), none free within ${limits.queueWaitMs} ms (POLICY_OPA_QUEUE_MS)`,
          ),
        );
      }, limits.queueWaitMs);
      this.waiting.push(turn);
    });
  }
}

/**
 * Whose run it is: `submitted` for code an operator submits (validate, trial, impact, shadow),
 * `live` for the policy in force (the served bundle's check, its Wasm build). Each lane has slots
 * of its own, so that authors keeping every slot busy never hold back the revision in force.
 */
export type OpaLane = 'submitted' | 'live';

const opaSlots: Record<OpaLane, RunSlots> = { submitted: new RunSlots(), live: new RunSlots() };

/**
 * What a failed opa command said, without the scratch paths (`<path>/`, in the order given) in
 * front of file names, and a forbidden builtin named as such (not as an undefined function).
 */
export function opaMessage(run: OpaRun, ...paths: string[]): string {
  const message = paths.reduce((text, path) => text.replaceAll(`${path}/`, ''), run.stderr || run.stdout).trim();
  return explainForbiddenBuiltins(message);
}
