/**
 * What the policy sandbox's threads do (worker.ts runs these; index.ts asks for them): the jobs,
 * as plain data that crosses between threads, and the thread's side of each.
 */
import type { PolicySnapshot } from '../bundle/build.js';
import type { SchemaCarrier } from '../bundle/data-schemas.js';
import { cedarRuleProblem, cedarTrialProblem, type CedarTrialCase } from '../cedar/checks.js';
import { CedarDriver, type CedarVerdict } from '../cedar/driver.js';
import type { DecisionInput, DecisionPoint } from '../contract/types.js';
import type { RegoVerdict } from '../opa/verdict.js';
import type { CedarExplanation } from '../explain.js';
import { loadCompiledRego, outOfWasmMemory, wasmMemoryOf, type CompiledRego } from '../opa/compiled.js';
import type { ValidateFunction } from 'ajv';

/** One revision's policy as a thread loads it: the snapshot, and its compiled module (null: none, OPA decides its Rego). */
export interface SandboxPolicy {
  snapshot: PolicySnapshot;
  module: { wasm: Uint8Array; points: DecisionPoint[] } | null;
}

export type SandboxJob =
  | { kind: 'cedar-rule'; content: string }
  /** The merged data against the pack's schemas (read from `packDir`) and the entries' own: data-schemas.ts. */
  | { kind: 'data-schemas'; mergedData: Record<string, unknown>; entries: SchemaCarrier[]; packDir: string }
  | { kind: 'cedar-trial'; snapshot: PolicySnapshot; cases: CedarTrialCase[]; budgetMs: number }
  /** `policy` is sent only when the thread answered that it does not hold the revision. */
  | { kind: 'decide'; revision: string; point: DecisionPoint; inputs: DecisionInput[]; policy?: SandboxPolicy }
  /** Cedar's verdict on one input and the text of its determining policies (the decision playground), likewise. */
  | { kind: 'cedar-explain'; revision: string; point: DecisionPoint; input: DecisionInput; policy?: SandboxPolicy };

/** The verdicts of `decide` (Rego null: the module cannot decide it, OPA must), or `unknown`: send the policy. */
export type DecideResult =
  { unknown: true } | { rego: (RegoVerdict | null)[]; cedar: CedarVerdict[]; loadProblem?: string };

/** An evaluation stopped because it needed more memory than it may have. */
export class OutOfMemory extends Error {}

/** Revisions a thread keeps loaded: the live one, a proposed change or two, the shadow's (as the replayer keeps). */
const KEPT_REVISIONS = 4;

interface Loaded {
  snapshot: PolicySnapshot;
  compiled: CompiledRego | null;
  cedar: CedarDriver;
}

/** The thread's side: runs jobs, keeping a few revisions loaded (each compiled to Wasm once per thread). */
export class SandboxJobs {
  private readonly loaded = new Map<string, Loaded>();
  /** Why the module's last evaluation stopped (null: it did not), as CompiledRego reports it. */
  private lastStop: string | null = null;

  constructor(
    /** The most Wasm memory one OPA module may have, in MB. */
    private readonly memoryMb: number,
  ) {}

  async run(job: SandboxJob): Promise<unknown> {
    if (job.kind === 'cedar-rule') return cedarRuleProblem(job.content);
    if (job.kind === 'cedar-trial') return cedarTrialProblem(job.snapshot, job.cases, job.budgetMs);
    if (job.kind === 'data-schemas') return dataSchemasProblem(job);
    if (job.kind === 'cedar-explain') return this.explainCedar(job);
    return this.decide(job);
  }

  private async decide(job: Extract<SandboxJob, { kind: 'decide' }>): Promise<DecideResult> {
    const { policy, loadProblem } = await this.revisionOf(job);
    if (!policy) return { unknown: true };
    const rego = job.inputs.map((input) => {
      this.lastStop = null;
      const verdict = policy.compiled?.evaluate(job.point, input) ?? null;
      // Not left to OPA: an evaluation that outgrew its memory here would grow without bound there.
      if (outOfWasmMemory(this.lastStop)) throw new OutOfMemory(this.lastStop);
      return verdict;
    });
    const cedar = job.inputs.map((input) => policy.cedar.evaluate(policy.snapshot, job.point, input));
    return { rego, cedar, ...(loadProblem ? { loadProblem } : {}) };
  }

  private async explainCedar(
    job: Extract<SandboxJob, { kind: 'cedar-explain' }>,
  ): Promise<CedarExplanation | { unknown: true }> {
    const { policy } = await this.revisionOf(job);
    if (!policy) return { unknown: true };
    const verdict = policy.cedar.evaluate(policy.snapshot, job.point, job.input);
    const texts = verdict.kind === 'decided' ? policy.cedar.policyTexts(policy.snapshot, verdict.policies) : [];
    return { verdict, texts };
  }

  /** The job's revision, loaded first when the job brings it; undefined when the thread does not hold it. */
  private async revisionOf(job: {
    revision: string;
    policy?: SandboxPolicy;
  }): Promise<{ policy?: Loaded; loadProblem?: string }> {
    const loadProblem = job.policy ? await this.load(job.revision, job.policy) : undefined;
    const policy = this.loaded.get(job.revision);
    if (!policy) return {};
    // Most recently used last, so that the oldest goes first.
    this.loaded.delete(job.revision);
    this.loaded.set(job.revision, policy);
    return { policy, ...(loadProblem ? { loadProblem } : {}) };
  }

  private async load(revision: string, policy: SandboxPolicy): Promise<string | undefined> {
    let problem: string | undefined;
    let compiled: CompiledRego | null = null;
    if (policy.module) {
      const made = await loadCompiledRego(
        policy.snapshot,
        policy.module,
        (_point, reason) => (this.lastStop = reason),
        wasmMemoryOf(this.memoryMb),
      );
      if ('problem' in made) problem = made.problem;
      else compiled = made;
    }
    this.loaded.set(revision, { snapshot: policy.snapshot, compiled, cedar: new CedarDriver() });
    while (this.loaded.size > KEPT_REVISIONS) this.loaded.delete(this.loaded.keys().next().value!);
    return problem;
  }
}

/** The pack's compiled schemas by pack folder, in this thread (compiled functions cannot be sent to it). */
const packSchemasByDir = new Map<string, Map<string, ValidateFunction>>();

/**
 * An author's schema is run here, not on the event loop: Ajv's time on one value is unbounded even
 * for a schema its secure meta-schema passes (uniqueItems over many objects grows with their
 * number squared; an anyOf of two references to itself doubles at each level of the data).
 * Loaded at the first such job: a thread that only parses Cedar never compiles Ajv's schemas.
 */
async function dataSchemasProblem(job: Extract<SandboxJob, { kind: 'data-schemas' }>): Promise<string | null> {
  const { dataSchemaProblem, packSchemas } = await import('../bundle/data-schemas.js');
  let pack = packSchemasByDir.get(job.packDir);
  if (!pack) packSchemasByDir.set(job.packDir, (pack = packSchemas(job.packDir)));
  return dataSchemaProblem(job.mergedData, job.entries, pack);
}
