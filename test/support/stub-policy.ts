import type { Middleware } from 'koa';
import type {
  Decision,
  DecisionExplanation,
  DecisionInput,
  DecisionOutcome,
  DecisionPoint,
  PolicyEngine,
  PolicyVocabulary,
} from '../../src/policy/index.js';
import { failClosed } from '../../src/policy/combine.js';

/** What the stub answers for one question: a decision, an engine failure (`{ engineError }`), or a function of the input. */
export type ScriptedAnswer =
  | Decision
  | { engineError: string; description?: string }
  | ((input: DecisionInput, point: DecisionPoint) => Decision | { engineError: string; description?: string });

/** One question the stub was asked, in order. */
export interface AskedDecision {
  point: DecisionPoint;
  input: DecisionInput;
}

/**
 * A PolicyEngine (src/policy) with scripted decisions, for unit tests of the code that asks it
 * (grant gates, introspection, UMA, delegation, AuthZEN): each point answers what `script` says
 * (else `fallback`, a deny), every question is kept in `asked`, and an engine failure is the
 * fail-closed outcome the real engine gives (src/policy/combine.ts), so that refusal mapping is
 * exercised as in production. Everything else the interface offers answers as an engine with
 * an empty, ready bundle.
 */
export class StubPolicyEngine implements PolicyEngine {
  readonly asked: AskedDecision[] = [];
  private readonly standing = new Map<DecisionPoint, ScriptedAnswer>();
  private readonly queued = new Map<DecisionPoint, ScriptedAnswer[]>();

  constructor(private readonly fallback: ScriptedAnswer = { allow: false, error: 'access_denied' }) {}

  /** Every question at `point` is answered `answer` (once the `answerOnce` answers queued there are used). */
  answer(point: DecisionPoint, answer: ScriptedAnswer): this {
    this.standing.set(point, answer);
    return this;
  }

  /** The next question at `point` not answered by an earlier `answerOnce` is answered `answer`. */
  answerOnce(point: DecisionPoint, answer: ScriptedAnswer): this {
    this.queued.set(point, [...(this.queued.get(point) ?? []), answer]);
    return this;
  }

  /** The inputs asked at `point`, in order. */
  inputsAt(point: DecisionPoint): DecisionInput[] {
    return this.asked.filter((asked) => asked.point === point).map((asked) => asked.input);
  }

  async decide(point: DecisionPoint, input: DecisionInput): Promise<DecisionOutcome> {
    this.asked.push({ point, input });
    const scripted = this.queued.get(point)?.shift() ?? this.standing.get(point) ?? this.fallback;
    const answer = typeof scripted === 'function' ? scripted(input, point) : scripted;
    if ('engineError' in answer) return failClosed(point, input, answer.engineError, answer.description);
    return { point, decision: structuredClone(answer), input };
  }

  async decideAll(point: DecisionPoint, inputs: DecisionInput[]): Promise<DecisionOutcome[]> {
    const outcomes: DecisionOutcome[] = [];
    for (const input of inputs) outcomes.push(await this.decide(point, input));
    return outcomes;
  }

  async explain(point: DecisionPoint, input: DecisionInput): Promise<DecisionExplanation> {
    const { decision, engineError } = await this.decide(point, input);
    const verdict = engineError ? 'error' : decision.allow ? 'allow' : 'deny';
    return {
      point,
      decision,
      ...(engineError ? { engineError } : {}),
      engines: {
        rego: { verdict, rules: [], trace: [] },
        cedar: { verdict: 'none', policies: [], errors: [] },
      },
    };
  }

  async isReady(): Promise<boolean> {
    return true;
  }

  async revisions(): Promise<{ store: string; opa: string | null; inProcess: string | null }> {
    return { store: 'stub', opa: 'stub', inProcess: null };
  }

  async policyFaults(): Promise<never[]> {
    return [];
  }

  async bundleProblemWith(): Promise<string | null> {
    return null;
  }

  async validateRule(): Promise<string | null> {
    return null;
  }

  bundleMiddleware(): Middleware {
    return (_ctx, next) => next();
  }

  readonly data = new Map<string, unknown>();

  async policyData(dataKey: string): Promise<unknown> {
    return this.data.get(dataKey);
  }

  async authorizationDetailsTypes(): Promise<string[]> {
    return [];
  }

  async vocabulary(): Promise<PolicyVocabulary> {
    return { revision: 'stub', digest: 'stub', authorizationDetailsTypes: [], scopes: [] };
  }

  async close(): Promise<void> {}
}
