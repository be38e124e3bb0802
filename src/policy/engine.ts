import type { Middleware } from 'koa';
import type { Config } from '../config/index.js';
import type { Logger } from '../log/index.js';
import type { Store } from '../store/index.js';
import type { PolicySnapshot } from './bundle/build.js';
import { BUNDLE_PATH, bundleMiddleware } from './bundle/route.js';
import { CedarDriver, type CedarVerdict } from './cedar/driver.js';
import { combine, failClosed } from './combine.js';
import type { DecisionInput, DecisionOutcome, DecisionPoint } from './contract/types.js';
import { valueAt } from './bundle/data-tree.js';
import { resolveOpaBinary } from './opa/binary.js';
import { removeScratchOfEndedProcesses } from './opa/scratch.js';
import { configureOpaSandbox } from './opa/sandbox.js';
import type { CompiledRego } from './opa/compiled.js';
import { OpaDriver } from './opa/driver.js';
import type { RegoVerdict } from './opa/verdict.js';
import { InProcessRego, localWasmCompiler, type WasmCompiler } from './opa/wasm.js';
import { ManagedOpa, managedOpaSettings, OPA_BUNDLE_NAME } from './opa/process.js';
import { explanationOf, type CedarExplanation, type DecisionExplanation } from './explain.js';
import { checkInput } from './contract/schemas.js';
import { PolicySnapshots } from './bundle/snapshots.js';
import { validateRule, type RuleKind } from './bundle/validate-rule.js';
import { bundleProblemWith, type BundleChange } from './bundle/validate.js';
import { contractExampleInputs } from './bundle/trial.js';
import { PolicyFaults, type PolicyFault } from './faults.js';
import { loadBundledRecords } from './records.js';
import { withConflictingDefinitions } from './opa/conflicts.js';
import { LiveDecisions, overBudgetVerdict } from './live/index.js';
import { policySandbox } from './sandbox/index.js';
import { PolicyVocabularies, type PolicyVocabulary } from './vocabulary.js';

export interface PolicyEngine {
  /** Never throws: an engine failure is a deny with `engineError` set. */
  decide(point: DecisionPoint, input: DecisionInput): Promise<DecisionOutcome>;
  /** The same point for many inputs, in order, with one OPA round trip for all of them (AuthZEN batches and searches). */
  decideAll(point: DecisionPoint, inputs: DecisionInput[]): Promise<DecisionOutcome[]>;
  /** The decision as `decide` makes it, with each engine's verdict and why: Rego rules and trace, Cedar policies (Admin playground). */
  explain(point: DecisionPoint, input: DecisionInput): Promise<DecisionExplanation>;
  /** OPA has activated the bundle (for /healthz). */
  isReady(): Promise<boolean>;
  /** The bundle revision the store holds now, the one OPA has activated and the one compiled in process (null: none yet), for /healthz. */
  revisions(): Promise<{ store: string; opa: string | null; inProcess: string | null }>;
  /**
   * The decision points the live policy cannot decide (for /healthz): most of a point's decisions
   * failed for the policy's own error within POLICY_FAULT_WINDOW_SECONDS, or the revision OPA
   * serves fails on a contract example (asked of OPA once per revision). Also the points where
   * only some decisions failed (`failing: false`).
   */
  policyFaults(revisions: { store: string; opa: string | null }): Promise<PolicyFault[]>;
  /**
   * Null when the bundle with this rule or data write (or deletion) compiles and decides every
   * contract example and `change.recordedInputs` without an error, else OPA's (or Cedar's) message.
   */
  bundleProblemWith(change: BundleChange): Promise<string | null>;
  /** Null when valid, else the engine's error message (for the Admin API's 400). */
  validateRule(kind: RuleKind, path: string, content: string): Promise<string | null>;
  /** Serves GET /policy/bundle.tar.gz; passes every other request on. */
  bundleMiddleware(): Middleware;
  /** The value policies see at data.<dataKey> (bundled entries only), or undefined. */
  policyData(dataKey: string): Promise<unknown>;
  /** Discovery's authorization_details_types_supported: keys of resource types and RAR-only types (the current vocabulary's). */
  authorizationDetailsTypes(): Promise<readonly string[]>;
  /**
   * What policy data defines for the protocol layer (RAR types), derived once per revision:
   * what the tenants' oidc-provider instances are built with, rebuilt when `revision` moves on.
   */
  vocabulary(): Promise<PolicyVocabulary>;
  /** Stops the managed OPA and closes connections. */
  close(): Promise<void>;
}

/** What createPolicyEngine returns: the contract plus two facts for operations and tests. */
export interface RunningPolicyEngine extends PolicyEngine {
  /** Base URL of the OPA decisions go to. */
  readonly opaUrl: string;
  /** The managed OPA's process id; undefined with an external OPA. */
  readonly managedOpaPid: number | undefined;
}

export interface PolicyEngineOptions {
  config: Config;
  store: Store;
  log: Logger;
  /** Where the managed OPA fetches the bundle; default http://127.0.0.1:<config.port>/policy/bundle.tar.gz. */
  bundleUrl?: string;
  /** The managed OPA another process runs for this machine's workers (src/workers): none is started here. */
  sharedOpa?: SharedOpa;
  /** How a revision is compiled to Wasm for Rego in process; default: by this process's OPA binary. */
  compileWasm?: WasmCompiler;
}

/** The managed OPA of the machine, run by the primary process for every worker (src/workers). */
export interface SharedOpa {
  /** Its base URL now: a restarted OPA may listen on another port. */
  url(): string;
  /** The token its REST API requires. */
  token: string;
  /** Its process id (for operations and tests); undefined while it restarts. */
  pid(): number | undefined;
}

/** Polls `isReady` until the bundle is active or the time is up. */
export async function waitUntilReady(engine: PolicyEngine, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await engine.isReady()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Starts the policy layer: with OPA_URL unset, a managed local OPA that polls this server's
 * bundle endpoint (so call this once the HTTP server listens), unless the machine's primary
 * process runs one for every worker (`sharedOpa`). Returns without waiting for the
 * bundle: until OPA has it, decisions fail closed and `isReady()` is false.
 */
export async function createPolicyEngine(options: PolicyEngineOptions): Promise<RunningPolicyEngine> {
  const { config } = options;
  const log = options.log.child({ component: 'policy' });
  configureOpaSandbox(config);
  // In every mode (managed, shared or external OPA): each runs checks and Wasm builds in scratch folders.
  const scratchOf = await removeScratchOfEndedProcesses();
  if (scratchOf.length > 0)
    log.info({ ownerPids: scratchOf }, 'removed the scratch folders of processes that died in the middle of a check');
  const opaBinary = resolveOpaBinary(config.opaBin);
  const shared = config.opaUrl ? null : (options.sharedOpa ?? null);
  const managed =
    config.opaUrl || shared
      ? null
      : new ManagedOpa({
          ...managedOpaSettings(config),
          bundleUrl: options.bundleUrl ?? `http://127.0.0.1:${config.port}${BUNDLE_PATH}`,
          log: options.log.child({ component: 'opa' }),
        });
  await managed?.start();
  const externalUrl = config.opaUrl?.replace(/\/+$/, '');
  return new ArbiterPolicyEngine({
    config,
    log,
    inProcessLog: options.log.child({ component: 'rego-in-process' }),
    opaBinary,
    compileWasm: options.compileWasm ?? localWasmCompiler(opaBinary, 'live'),
    managed,
    managedPid: () => managed?.pid ?? shared?.pid(),
    store: options.store,
    snapshots: new PolicySnapshots(options.store, log, opaBinary),
    opaUrl: () => externalUrl ?? shared?.url() ?? (managed as ManagedOpa).url,
    opaToken: shared ? shared.token : managed ? managed.apiToken : config.opaToken,
  });
}

interface EngineParts {
  config: Config;
  log: Logger;
  /** A child of the server's logger, not of `log`: pino would write a child's `component` twice. */
  inProcessLog: Logger;
  opaBinary: string;
  compileWasm: WasmCompiler;
  store: Store;
  /** The OPA this engine started and stops; null with an external or a shared one. */
  managed: ManagedOpa | null;
  /** The pid of the managed OPA, this engine's or the machine's shared one. */
  managedPid: () => number | undefined;
  snapshots: PolicySnapshots;
  opaUrl: () => string;
  /** What every request to OPA bears (null: an external OPA without token authentication). */
  opaToken: string | null;
}

class ArbiterPolicyEngine implements RunningPolicyEngine {
  private readonly opa: OpaDriver;
  private readonly cedar = new CedarDriver();
  private readonly inProcess: InProcessRego | null;
  /** Cedar, Rego in process and policyData re-read the store at most this often: a change is in force within a second, as OPA's long poll brings it to OPA. */
  private readonly snapshotMaxAgeMs: number;
  private readonly faults: PolicyFaults;
  private readonly live: LiveDecisions;
  private readonly vocabularies = new PolicyVocabularies();

  constructor(private readonly parts: EngineParts) {
    this.opa = new OpaDriver(parts.opaUrl, parts.config.policyDecisionTimeoutMs, parts.opaToken);
    this.inProcess = parts.config.policyRegoInProcess
      ? new InProcessRego(parts.compileWasm, (snapshot) => parts.snapshots.bundle(snapshot), parts.inProcessLog)
      : null;
    this.snapshotMaxAgeMs = Math.min(parts.config.policyPollMinSeconds, 1) * 1000;
    this.faults = new PolicyFaults(parts.config.policyFaultWindowSeconds * 1000, parts.store, parts.log);
    this.live = new LiveDecisions({
      budgetMs: parts.config.policyDecisionTimeoutMs,
      memoryMb: parts.config.policyDecisionMemoryMb,
      cedar: this.cedar,
      log: parts.log,
    });
  }

  get opaUrl(): string {
    return this.parts.opaUrl();
  }

  get managedOpaPid(): number | undefined {
    return this.parts.managedPid();
  }

  async decide(point: DecisionPoint, input: DecisionInput): Promise<DecisionOutcome> {
    const problem = checkInput(point, input);
    if (problem) return this.failed(point, input, `invalid decision input for ${point}: ${problem}`);
    try {
      const deadlineAt = Date.now() + this.parts.config.policyDecisionTimeoutMs;
      const snapshot = await this.snapshotOrFailure();
      const [verdict] = await this.verdictsOf(snapshot, point, [input], deadlineAt);
      const { rego, cedar: cedarVerdict } = verdict!; // one input, one verdict
      const outcome = combine(point, input, rego, cedarVerdict);
      this.countFault(snapshot, point, rego, cedarVerdict);
      if (outcome.engineError)
        this.parts.log.warn({ point, engineError: outcome.engineError }, 'policy decision failed closed');
      return outcome;
    } catch (error) {
      return this.failed(point, input, `unexpected policy engine error: ${(error as Error).message}`);
    }
  }

  async decideAll(point: DecisionPoint, inputs: DecisionInput[]): Promise<DecisionOutcome[]> {
    if (inputs.length <= 1) return Promise.all(inputs.map((input) => this.decide(point, input)));
    const problems = inputs.map((input) => checkInput(point, input));
    const checked = inputs.filter((_, index) => !problems[index]);
    try {
      const deadlineAt = Date.now() + this.parts.config.policyDecisionTimeoutMs;
      const snapshot = await this.snapshotOrFailure();
      const verdicts = await this.verdictsOf(snapshot, point, checked, deadlineAt);
      let next = 0;
      return inputs.map((input, index) => {
        const problem = problems[index];
        if (problem) return this.failed(point, input, `invalid decision input for ${point}: ${problem}`);
        const { rego, cedar: cedarVerdict } = verdicts[next]!; // one verdict per checked input, in order
        const outcome = combine(point, input, rego, cedarVerdict);
        this.countFault(snapshot, point, rego, cedarVerdict);
        next += 1;
        return outcome;
      });
    } catch (error) {
      return inputs.map((input) =>
        this.failed(point, input, `unexpected policy engine error: ${(error as Error).message}`),
      );
    }
  }

  async explain(point: DecisionPoint, input: DecisionInput): Promise<DecisionExplanation> {
    const problem = checkInput(point, input);
    const invalid = { kind: 'failed', reason: `invalid decision input for ${point}: ${problem}` } as const;
    if (problem) return explanationOf(point, input, { verdict: invalid, trace: [] }, { verdict: invalid, texts: [] });
    const [rego, cedar] = await Promise.all([
      this.opa.explain(point, input),
      this.snapshotOrFailure().then((snapshot) => this.explainedCedar(snapshot, point, input)),
    ]);
    const snapshot = this.parts.snapshots.lastKnown();
    if (snapshot) rego.verdict = bothSides(snapshot, rego.verdict);
    return explanationOf(point, input, rego, cedar);
  }

  /**
   * Cedar's part of an explained decision, in the policy sandbox: anyone who may read decisions
   * can ask for one, and a large policy set takes long to compile and decide, which must not hold
   * the event loop. A sandbox over its limit or busy is a failed verdict (the decision fails closed).
   */
  private async explainedCedar(
    snapshot: PolicySnapshot | Error,
    point: DecisionPoint,
    input: DecisionInput,
  ): Promise<CedarExplanation> {
    if (snapshot instanceof Error || !snapshot.rules.some((rule) => rule.kind === 'cedar'))
      return { verdict: this.cedarVerdict(snapshot, point, input), texts: [] };
    try {
      return await policySandbox().explainCedar(snapshot, point, input);
    } catch (error) {
      return { verdict: { kind: 'failed', reason: `Cedar could not decide: ${(error as Error).message}` }, texts: [] };
    }
  }

  async isReady(): Promise<boolean> {
    return this.opa.bundlesActivated();
  }

  async revisions(): Promise<{ store: string; opa: string | null; inProcess: string | null }> {
    const [snapshot, opa] = await Promise.all([
      this.parts.snapshots.current(0),
      this.opa.activeRevision(OPA_BUNDLE_NAME),
    ]);
    // Reading the revision is also the moment to start compiling it, so that it is ready early.
    const compiled = this.compiledFor(snapshot);
    return { store: snapshot.revision, opa, inProcess: compiled ? this.inProcess!.revision : null };
  }

  /**
   * The compiled module of the snapshot's revision (compiling it if need be), once the decision
   * threads can take what is not proven cheap: until then Rego is OPA's, with its timeout.
   */
  private compiledFor(snapshot: PolicySnapshot): CompiledRego | null {
    const compiled = this.inProcess?.compiledFor(snapshot) ?? null;
    return this.live.started ? compiled : null;
  }

  async policyFaults(revisions: { store: string; opa: string | null }): Promise<PolicyFault[]> {
    const probed = revisions.opa ? await this.faults.probed(revisions.opa, () => this.probe(revisions.opa!)) : [];
    const probedPoints = new Set(probed.map((fault) => fault.point));
    const counted = await this.faults.recent([revisions.store, revisions.opa]);
    return [...probed, ...counted.filter((fault) => !probedPoints.has(fault.point))];
  }

  /** OPA's answers to the contract examples of every point, one batch per point: the points it cannot decide. */
  private async probe(revision: string): Promise<PolicyFault[]> {
    const examples = contractExampleInputs();
    const points = [...new Set(examples.map((example) => example.point as DecisionPoint))];
    const failures = await Promise.all(
      points.map(async (point) => {
        const inputs = examples.filter((example) => example.point === point).map((example) => example.input);
        const answers = await this.opa.evaluateAll(point, inputs as DecisionInput[]);
        const failure = answers.find((answer) => answer.kind === 'failed');
        if (failure?.kind !== 'failed') return null;
        // OPA down or restarting says nothing about the policy: the probe is made again at the next /healthz.
        if (!failure.policyFault) throw new Error(failure.reason);
        return { point, reason: failure.reason };
      }),
    );
    const at = new Date().toISOString();
    const snapshot = await this.snapshotOrFailure();
    return failures.flatMap((failure): PolicyFault[] => {
      if (!failure) return [];
      const reason =
        snapshot instanceof Error ? failure.reason : withConflictingDefinitions(failure.reason, snapshot.rules);
      const error = `${reason} (on the contract's examples)`;
      this.parts.log.error({ point: failure.point, revision, error }, 'the policy in force cannot decide');
      return [{ point: failure.point, error, revision, decisions: null, failed: null, at, failing: true }];
    });
  }

  /** Counts a decision for /healthz: a fault when an engine failed for the policy's own error (not OPA or the store being down). */
  private countFault(
    snapshot: PolicySnapshot | Error,
    point: DecisionPoint,
    rego: RegoVerdict,
    cedarVerdict: CedarVerdict,
  ): void {
    if (snapshot instanceof Error) return;
    const fault =
      rego.kind === 'failed' && rego.policyFault
        ? rego.reason
        : cedarVerdict.kind === 'failed'
          ? cedarVerdict.reason
          : null;
    this.faults.count(point, snapshot.revision, fault);
  }

  async bundleProblemWith(change: BundleChange): Promise<string | null> {
    return bundleProblemWith(this.parts.opaBinary, this.parts.store, change);
  }

  /**
   * Checked together with the other bundled Rego rules, so that imports of shared helpers resolve
   * (the one of the candidate's package is left out by validateRule: the candidate stands in for it).
   */
  async validateRule(kind: RuleKind, path: string, content: string): Promise<string | null> {
    const { rules } = await loadBundledRecords(this.parts.store);
    const companions = rules.filter((rule) => rule.kind === 'rego');
    return validateRule(this.parts.opaBinary, kind, path, content, companions);
  }

  bundleMiddleware(): Middleware {
    return bundleMiddleware(this.parts.snapshots, this.parts.config.policyBundleToken, this.parts.log);
  }

  async policyData(dataKey: string): Promise<unknown> {
    return valueAt((await this.snapshot()).mergedData, dataKey);
  }

  async authorizationDetailsTypes(): Promise<readonly string[]> {
    return (await this.vocabulary()).authorizationDetailsTypes;
  }

  async vocabulary(): Promise<PolicyVocabulary> {
    return this.vocabularies.of(await this.snapshot());
  }

  async close(): Promise<void> {
    this.opa.close();
    await this.live.close();
    await this.faults.close();
    await this.parts.managed?.stop();
  }

  /**
   * Each input's Rego and Cedar verdicts by `deadlineAt`: in process where the revision is compiled
   * (on the event loop while proven cheap, else in a decision thread: src/policy/live), OPA for
   * the rest with the time left. Without a snapshot, Rego is OPA's and Cedar fails closed.
   */
  private async verdictsOf(
    snapshot: PolicySnapshot | Error,
    point: DecisionPoint,
    inputs: DecisionInput[],
    deadlineAt: number,
  ): Promise<{ rego: RegoVerdict; cedar: CedarVerdict }[]> {
    if (!inputs.length) return [];
    if (snapshot instanceof Error) {
      const cedar = this.cedarVerdict(snapshot, point, inputs[0]!);
      return (await this.opaVerdicts(point, inputs, deadlineAt)).map((rego) => ({ rego, cedar }));
    }
    const compiled = this.compiledFor(snapshot);
    // Not compiled (yet): OPA decides Rego while Cedar is evaluated here.
    const fromOpa = compiled ? null : this.opaVerdicts(point, inputs, deadlineAt);
    const live = await this.live.evaluate(snapshot, compiled, point, inputs, deadlineAt);
    const left = live.flatMap((verdicts, index) => (verdicts.rego ? [] : [index]));
    const opa = fromOpa
      ? await fromOpa
      : await this.opaVerdicts(
          point,
          left.map((index) => inputs[index]!),
          deadlineAt,
        );
    // One live verdict per input; OPA's, one per input it was asked about.
    return live.map(({ rego, cedar }, index) => ({
      rego: bothSides(snapshot, rego ?? opa[fromOpa ? index : left.indexOf(index)]!),
      cedar,
    }));
  }

  /** OPA's verdicts with the time left before `deadlineAt` (one round trip for many inputs). */
  private async opaVerdicts(point: DecisionPoint, inputs: DecisionInput[], deadlineAt: number): Promise<RegoVerdict[]> {
    if (!inputs.length) return [];
    const left = deadlineAt - Date.now();
    const budget = this.parts.config.policyDecisionTimeoutMs;
    if (left <= 0) return inputs.map(() => overBudgetVerdict(point, budget, 'no time was left to ask OPA'));
    return inputs.length === 1
      ? [await this.opa.evaluate(point, inputs[0]!, left)]
      : this.opa.evaluateAll(point, inputs, left);
  }

  private cedarVerdict(snapshot: PolicySnapshot | Error, point: DecisionPoint, input: DecisionInput): CedarVerdict {
    if (snapshot instanceof Error) return { kind: 'failed', reason: `policy records unavailable: ${snapshot.message}` };
    return this.cedar.evaluate(snapshot, point, input);
  }

  /** The snapshot, or the error that kept it from being read (each engine then decides what that means). */
  private snapshotOrFailure(): Promise<PolicySnapshot | Error> {
    return this.snapshot().catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
  }

  /** The current snapshot; while the store is unreachable, the last one read (as OPA keeps its last bundle). */
  private async snapshot(): Promise<PolicySnapshot> {
    try {
      return await this.parts.snapshots.current(this.snapshotMaxAgeMs);
    } catch (error) {
      const stale = this.parts.snapshots.lastKnown();
      if (!stale) throw error;
      this.parts.log.warn({ err: error }, 'policy records unavailable; using the last ones read');
      return stale;
    }
  }

  private failed(point: DecisionPoint, input: DecisionInput, reason: string): DecisionOutcome {
    this.parts.log.error({ point, engineError: reason }, 'policy decision failed closed');
    return failClosed(point, input, reason);
  }
}

/** A failed Rego verdict whose reason is OPA's conflict error names every side of the conflict (opa/conflicts.ts). */
function bothSides(snapshot: PolicySnapshot | Error, verdict: RegoVerdict): RegoVerdict {
  if (verdict.kind !== 'failed' || !verdict.policyFault || snapshot instanceof Error) return verdict;
  return { ...verdict, reason: withConflictingDefinitions(verdict.reason, snapshot.rules) };
}
