/**
 * The policy sandbox: policy code an operator submits (a rule to validate, a candidate's trial,
 * impact analysis and shadow evaluation, the Cedar part of an explained decision) is parsed and
 * evaluated in worker threads, never on the
 * event loop, so that a costly rule or candidate cannot stall the requests this process answers.
 * Each job has a time limit (POLICY_SANDBOX_TIMEOUT_MS: past it the thread is ended and replaced),
 * a memory limit (POLICY_SANDBOX_MEMORY_MB: the thread's heap, and each OPA module's Wasm memory),
 * and the process runs at most POLICY_SANDBOX_THREADS jobs at once (more wait a little, then 503).
 * The live engine's own decisions (the revision in force) are not made here.
 *
 * One sandbox per process, shared by everything that evaluates submitted code; the server sets
 * its limits from the configuration (configurePolicySandbox).
 */
import type { Config } from '../../config/index.js';
import type { PolicySnapshot } from '../bundle/build.js';
import type { CedarTrialCase } from '../cedar/checks.js';
import type { SchemaCarrier } from '../bundle/data-schemas.js';
import type { DecisionInput, DecisionPoint } from '../contract/types.js';
import type { CedarExplanation } from '../explain.js';
import type { DecideResult, SandboxJob, SandboxPolicy } from './jobs.js';
import { threadModule } from '../../config/index.js';
import { WorkerPool, type PoolEntry, type PoolLimits } from './pool.js';

export { SandboxBusyError, SandboxJobError, SandboxLimitError } from './pool.js';
export type { SandboxPolicy } from './jobs.js';

type SandboxSettings = Pick<Config, 'policySandboxTimeoutMs' | 'policySandboxMemoryMb' | 'policySandboxThreads'>;

/** Jobs that may wait for a thread (each a few time limits at most). */
const MAX_QUEUED = 64;

const SETTING_NAMES = { timeoutMs: 'POLICY_SANDBOX_TIMEOUT_MS', memoryMb: 'POLICY_SANDBOX_MEMORY_MB' };

export class PolicySandbox {
  private readonly pool: WorkerPool;

  constructor(limits: PoolLimits) {
    this.pool = new WorkerPool(workerEntry(limits.memoryMb), limits, SETTING_NAMES);
  }

  get limits(): PoolLimits {
    return this.pool.limits;
  }

  /** Null when the Cedar rule is valid, else Cedar's message (cedar/checks.ts). */
  cedarRuleProblem(content: string): Promise<string | null> {
    return this.run({ kind: 'cedar-rule', content });
  }

  /** Null when Cedar decides every case of the candidate without failing, each within `budgetMs`, else what failed on which input. */
  cedarTrialProblem(snapshot: PolicySnapshot, cases: CedarTrialCase[], budgetMs: number): Promise<string | null> {
    return this.run({ kind: 'cedar-trial', snapshot, cases, budgetMs });
  }

  /** Null when the merged data matches the pack's schemas (in `packDir`) and the entries' own, else the first mismatch. */
  dataSchemaProblem(
    mergedData: Record<string, unknown>,
    entries: SchemaCarrier[],
    packDir: string,
  ): Promise<string | null> {
    return this.run({ kind: 'data-schemas', mergedData, entries, packDir });
  }

  /**
   * The Rego (null: for OPA to decide) and Cedar verdicts of one revision on `inputs`. The
   * revision is loaded in the thread once (`policy` is asked for only when the thread lacks it).
   */
  async decide(
    revision: string,
    policy: () => Promise<SandboxPolicy>,
    point: DecisionPoint,
    inputs: DecisionInput[],
  ): Promise<Exclude<DecideResult, { unknown: true }>> {
    const first = await this.run<DecideResult>({ kind: 'decide', revision, point, inputs });
    if (!('unknown' in first)) return first;
    const again = await this.run<DecideResult>({ kind: 'decide', revision, point, inputs, policy: await policy() });
    if ('unknown' in again) throw new Error(`the policy thread could not load revision ${revision}`);
    return again;
  }

  /**
   * Cedar's verdict on `input` under the snapshot and the text of its determining policies, for
   * explaining a decision: here, bounded like every sandbox job, since compiling and evaluating a
   * large policy set can take long (the snapshot is loaded in the thread once, without Rego).
   */
  async explainCedar(snapshot: PolicySnapshot, point: DecisionPoint, input: DecisionInput): Promise<CedarExplanation> {
    const revision = `cedar:${snapshot.revision}`;
    const job = { kind: 'cedar-explain', revision, point, input } as const;
    const first = await this.run<CedarExplanation | { unknown: true }>(job);
    if (!('unknown' in first)) return first;
    const again = await this.run<CedarExplanation | { unknown: true }>({ ...job, policy: { snapshot, module: null } });
    if ('unknown' in again) throw new Error(`the policy thread could not load revision ${snapshot.revision}`);
    return again;
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private run<T>(job: SandboxJob): Promise<T> {
    return this.pool.run<T>(job);
  }
}

/** The thread's module: worker.ts (or .js) beside this file (thread-module.ts). */
function workerEntry(memoryMb: number): PoolEntry {
  return { ...threadModule(import.meta.url, 'worker'), workerData: { memoryMb } };
}

let shared: PolicySandbox | null = null;

/** The process's sandbox (with the default limits until the server configures it). */
export function policySandbox(): PolicySandbox {
  shared ??= new PolicySandbox(limitsOf(DEFAULT_SETTINGS));
  return shared;
}

/** Sets the process's limits from the configuration; a sandbox with other limits is closed and replaced. */
export function configurePolicySandbox(settings: SandboxSettings): PolicySandbox {
  const limits = limitsOf(settings);
  if (shared && sameLimits(shared.limits, limits)) return shared;
  void shared?.close();
  shared = new PolicySandbox(limits);
  return shared;
}

const DEFAULT_SETTINGS: SandboxSettings = {
  policySandboxTimeoutMs: 10_000,
  policySandboxMemoryMb: 256,
  policySandboxThreads: 1,
};

function limitsOf(settings: SandboxSettings): PoolLimits {
  return {
    timeoutMs: settings.policySandboxTimeoutMs,
    memoryMb: settings.policySandboxMemoryMb,
    threads: settings.policySandboxThreads,
    maxQueued: MAX_QUEUED,
  };
}

function sameLimits(a: PoolLimits, b: PoolLimits): boolean {
  return a.timeoutMs === b.timeoutMs && a.memoryMb === b.memoryMb && a.threads === b.threads;
}
