/**
 * Decisions of a bundle that is not (or not yet) in force: the candidate of a proposed change
 * (impact analysis) and the candidate revision of shadow records. They are made exactly as the
 * live engine makes its own (engine.ts): Rego compiled to WebAssembly and evaluated in this
 * process, OPA as the engine of record for what the module cannot decide (here `opa eval` of the
 * candidate's bundle, since the OPA sidecar serves only the live one), Cedar in process, and the
 * two combined by combine.ts. Nothing here counts toward /healthz or the decision metrics.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../../log/index.js';
import { buildBundle, type PolicySnapshot } from '../bundle/build.js';
import { opaVerdicts } from '../bundle/trial.js';
import { CedarDriver, type CedarVerdict } from '../cedar/driver.js';
import { combine } from '../combine.js';
import type { DecisionInput, DecisionOutcome, DecisionPoint } from '../contract/types.js';
import { inScratchDirectory } from '../opa/binary.js';
import { withConflictingDefinitions } from '../opa/conflicts.js';
import type { RegoVerdict } from '../opa/driver.js';
import { compileRego, type CompiledRego } from '../opa/wasm.js';

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

  /** Compiled to Wasm when it can be; else every Rego decision of the revision goes to `opa eval`. */
  private async compile(snapshot: PolicySnapshot): Promise<PreparedPolicy> {
    const bundle = await buildBundle(snapshot);
    const compiled = await compileRego(this.opaBinary, snapshot, bundle, () => undefined).catch((error: unknown) => ({
      problem: `the module could not be built: ${(error as Error).message}`,
    }));
    if ('problem' in compiled)
      this.log.info(
        { revision: snapshot.revision, reason: compiled.problem },
        'replayed Rego decisions of this revision go to opa eval',
      );
    return new PreparedPolicy(snapshot, 'problem' in compiled ? null : compiled, bundle, this.opaBinary);
  }
}

/** One revision's policy: Rego in process (OPA for the rest), Cedar, combined as the live engine combines them. */
export class PreparedPolicy {
  private readonly cedar = new CedarDriver();

  constructor(
    readonly snapshot: PolicySnapshot,
    private readonly compiled: CompiledRego | null,
    private readonly bundle: Buffer,
    private readonly opaBinary: string,
  ) {}

  get revision(): string {
    return this.snapshot.revision;
  }

  /** The decisions of `inputs` (each already fits the point's input schema), in order. */
  async decideAll(point: DecisionPoint, inputs: DecisionInput[]): Promise<DecisionOutcome[]> {
    const rego = await this.regoVerdicts(point, inputs);
    return inputs.map((input, index) => combine(point, input, rego[index], this.cedarVerdict(point, input)));
  }

  private async regoVerdicts(point: DecisionPoint, inputs: DecisionInput[]): Promise<RegoVerdict[]> {
    const verdicts = inputs.map((input) => this.compiled?.evaluate(point, input) ?? null);
    const left = verdicts.flatMap((verdict, index) => (verdict ? [] : [index]));
    if (left.length) {
      const fromOpa = await this.fromOpa(
        point,
        left.map((index) => inputs[index]),
      );
      left.forEach((index, position) => (verdicts[index] = fromOpa[position]));
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

  private cedarVerdict(point: DecisionPoint, input: DecisionInput): CedarVerdict {
    try {
      return this.cedar.evaluate(this.snapshot, point, input);
    } catch (error) {
      return { kind: 'failed', reason: `Cedar evaluation failed: ${(error as Error).message}` };
    }
  }
}
