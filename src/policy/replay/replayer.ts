/**
 * Decisions of a bundle that is not (or not yet) in force: the candidate of a proposed change
 * (impact analysis) and the candidate revision of shadow records. They are made exactly as the
 * live engine makes its own (engine.ts): Rego compiled to WebAssembly, OPA as the engine of record
 * for what the module cannot decide (here `opa eval` of the candidate's bundle, since the OPA
 * sidecar serves only the live one), Cedar, and the two combined by combine.ts. The module and
 * Cedar run in the policy sandbox's threads (sandbox/), off the event loop and within its limits:
 * this is code an operator submitted. Nothing here counts toward /healthz or the decision metrics.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../log/index.js';
import { buildBundle, type PolicySnapshot } from '../bundle/build.js';
import { opaVerdicts } from '../bundle/trial.js';
import { combine } from '../combine.js';
import type { DecisionInput, DecisionOutcome, DecisionPoint } from '../contract/types.js';
import { inScratchDirectory } from '../opa/scratch.js';
import { withConflictingDefinitions } from '../opa/conflicts.js';
import type { RegoVerdict } from '../opa/verdict.js';
import { localWasmCompiler, type WasmBuild } from '../opa/wasm.js';
import { policySandbox, type SandboxPolicy } from '../sandbox/index.js';

/** Candidates kept compiled at once: the live revision, a proposed change or two, the shadow revision. */
const KEPT_REVISIONS = 4;

/** Inputs per `opa eval` of the fallback (its output must stay within the CLI runner's buffer). */
const OPA_BATCH = 250;

/** Compiles a bundle revision once and keeps the newest few, for the decisions of any of them. */
export class PolicyReplayer {
  private readonly prepared = new Map<string, Promise<PreparedPolicy>>();

  constructor(
    private readonly opaBinary: string,
    private readonly log: Logger,
  ) {}

  /** The snapshot's policy, ready to decide (compiled once per revision: about a second for the default pack). */
  prepare(snapshot: PolicySnapshot): Promise<PreparedPolicy> {
    const known = this.prepared.get(snapshot.revision);
    if (known) {
      // Most recently used last, so that the oldest goes first.
      this.prepared.delete(snapshot.revision);
      this.prepared.set(snapshot.revision, known);
      return known;
    }
    const made = this.compile(snapshot);
    this.prepared.set(snapshot.revision, made);
    made.catch(() => this.prepared.delete(snapshot.revision));
    while (this.prepared.size > KEPT_REVISIONS) this.prepared.delete(this.prepared.keys().next().value!);
    return made;
  }

  /** Compiled to Wasm when it can be (the sandbox's threads load it); else every Rego decision of the revision goes to `opa eval`. */
  private async compile(snapshot: PolicySnapshot): Promise<PreparedPolicy> {
    const bundle = await buildBundle(snapshot);
    const built: WasmBuild = await localWasmCompiler(this.opaBinary)(bundle, snapshot.revision).catch(
      (error: unknown) => ({ problem: `the module could not be built: ${(error as Error).message}` }),
    );
    if ('problem' in built) this.logFallback(snapshot.revision, built.problem);
    const module = 'problem' in built ? null : built;
    return new PreparedPolicy({ snapshot, module }, bundle, this.opaBinary, (reason) =>
      this.logFallback(snapshot.revision, reason),
    );
  }

  private logFallback(revision: string, reason: string): void {
    this.log.info({ revision, reason }, 'replayed Rego decisions of this revision go to opa eval');
  }
}

/** One revision's policy: Rego in the sandbox (OPA for the rest), Cedar, combined as the live engine combines them. */
export class PreparedPolicy {
  private loadProblemLogged = false;

  constructor(
    private readonly policy: SandboxPolicy,
    private readonly bundle: Buffer,
    private readonly opaBinary: string,
    /** Told once when the thread could not use the module (builtins it implements otherwise than OPA). */
    private readonly onLoadProblem: (reason: string) => void,
  ) {}

  get snapshot(): PolicySnapshot {
    return this.policy.snapshot;
  }

  get revision(): string {
    return this.snapshot.revision;
  }

  /**
   * The decisions of `inputs` (each already fits the point's input schema), in order. Rejects
   * with the sandbox's errors: a limit reached (SandboxLimitError), no thread free (SandboxBusyError).
   */
  async decideAll(point: DecisionPoint, inputs: DecisionInput[]): Promise<DecisionOutcome[]> {
    const verdicts = await policySandbox().decide(this.revision, async () => this.policy, point, inputs);
    if (verdicts.loadProblem && !this.loadProblemLogged) {
      this.loadProblemLogged = true;
      this.onLoadProblem(verdicts.loadProblem);
    }
    const rego = await this.regoVerdicts(point, inputs, verdicts.rego);
    return inputs.map((input, index) => combine(point, input, rego[index]!, verdicts.cedar[index]!));
  }

  /** The module's verdicts, with OPA's for those it could not make. */
  private async regoVerdicts(
    point: DecisionPoint,
    inputs: DecisionInput[],
    fromModule: (RegoVerdict | null)[],
  ): Promise<RegoVerdict[]> {
    const verdicts = [...fromModule];
    const left = verdicts.flatMap((verdict, index) => (verdict ? [] : [index]));
    if (left.length) {
      const fromOpa = await this.fromOpa(
        point,
        left.map((index) => inputs[index]!),
      );
      left.forEach((index, position) => (verdicts[index] = fromOpa[position]!));
    }
    return (verdicts as RegoVerdict[]).map((verdict) =>
      verdict.kind === 'failed' && verdict.policyFault
        ? { ...verdict, reason: withConflictingDefinitions(verdict.reason, this.snapshot.rules) }
        : verdict,
    );
  }
  /** `opa eval` of this revision's bundle for the inputs the module could not decide, a batch at a time. */
  private async fromOpa(point: DecisionPoint, inputs: DecisionInput[]): Promise<RegoVerdict[]> {
    try {
      return await inScratchDirectory('arbiter-replay-', async (dir) => {
        const bundleFile = join(dir, 'bundle.tar.gz');
        await writeFile(bundleFile, this.bundle);
        const verdicts: RegoVerdict[] = [];
        for (let start = 0; start < inputs.length; start += OPA_BATCH) {
          const batch = inputs.slice(start, start + OPA_BATCH);
          verdicts.push(...(await opaVerdicts(this.opaBinary, bundleFile, join(dir, 'input.json'), point, batch)));
        }
        return verdicts;
      });
    } catch (error) {
      const reason = `OPA could not be run: ${(error as Error).message}`;
      return inputs.map((): RegoVerdict => ({ kind: 'failed', reason }));
    }
  }
}
