/**
 * A trial run of a candidate bundle before it is stored: every decision point is evaluated by
 * OPA itself (`opa eval` of the very bundle OPA would download) and by Cedar on the decision
 * contract's worked examples and on inputs recently recorded in the audit log. A bundle that
 * compiles can still fail to decide (two complete definitions of one `decision`, an object with
 * one key twice, a Cedar entity list Cedar cannot read), or decide an input slower than a live
 * decision may take (POLICY_DECISION_TIMEOUT_MS, as OPA times it): such a change is refused at the
 * Admin API instead of failing every request of that point (or like that input) closed once in force.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { exampleInput, POLICY_EXAMPLES } from '../contract/examples.js';
import { DECISION_POINTS, type DecisionInput, type DecisionPoint } from '../contract/types.js';
import { checkInput } from '../contract/schemas.js';
import { runOpa } from '../opa/binary.js';
import { policySandboxLimits } from '../opa/sandbox.js';
import { describeOpaErrors } from '../opa/driver.js';
import { resultVerdict, type RegoVerdict } from '../opa/verdict.js';
import { withConflictingDefinitions } from '../opa/conflicts.js';
import { policySandbox, SandboxJobError, SandboxLimitError } from '../sandbox/index.js';
import type { PolicySnapshot } from './build.js';

/** An input to try a candidate bundle on, and where it comes from (for the message of a refusal). */
export interface TrialInput {
  point: string;
  input: unknown;
  /** E.g. `the contract example "token-client-credentials"`, `the input of audit entry 42`. */
  source: string;
}

interface TrialCase {
  point: DecisionPoint;
  input: DecisionInput;
  source: string;
}

/** The decision contract's worked examples (src/policy/contract/examples.ts), one case each. */
export function contractExampleInputs(): TrialInput[] {
  return POLICY_EXAMPLES.map((example) => ({
    point: example.point,
    input: exampleInput(example),
    source: `the contract example "${example.name}"`,
  }));
}

/**
 * Null when every input decides without an error in both engines, else what failed, on which
 * input, with OPA's (or Cedar's) own message and the rule's `file:row`. `bundleFile` is the
 * candidate's gzipped bundle, `dir` a scratch directory for the input files.
 */
export async function trialProblem(
  opaBinary: string,
  bundleFile: string,
  dir: string,
  snapshot: PolicySnapshot,
  inputs: TrialInput[],
): Promise<string | null> {
  const cases = usableCases(inputs);
  const rego = await regoProblem(opaBinary, bundleFile, dir, cases);
  return rego ? withConflictingDefinitions(rego, snapshot.rules) : cedarProblem(snapshot, cases);
}

/** Inputs of a known point that fit its schema (a recorded input of an older contract is skipped, as the engine would refuse it before OPA). */
function usableCases(inputs: TrialInput[]): TrialCase[] {
  return inputs.flatMap((candidate) => {
    const point = DECISION_POINTS.find((known) => known === candidate.point);
    if (!point || checkInput(point, candidate.input as DecisionInput)) return [];
    return [{ point, input: candidate.input as DecisionInput, source: candidate.source }];
  });
}

/**
 * One `opa eval` decides every case (about 25 ms for the default pack); only when it fails are
 * the cases tried one by one, to say which input the error shows on.
 */
async function regoProblem(
  opaBinary: string,
  bundleFile: string,
  dir: string,
  cases: TrialCase[],
): Promise<string | null> {
  if (cases.length === 0) return null;
  const points = [...new Set(cases.map((item) => item.point))];
  const casesOf = (point: DecisionPoint) => cases.filter((item) => item.point === point);
  const byPoint = Object.fromEntries(points.map((point) => [point, casesOf(point).map((item) => item.input)]));
  const query = points
    .map(
      (point) => `${point} := [[d | d := data.arbiter.${point}.decision with input as x] | some x in input.${point}]`,
    )
    .join('; ');
  const all = await evaluate(opaBinary, bundleFile, join(dir, 'trial-input.json'), byPoint, query);
  if ('errors' in all) return (await firstFailingCase(opaBinary, bundleFile, dir, cases)) ?? all.errors;
  if (all.evalMs > policySandboxLimits().decisionBudgetMs) {
    const slow = await firstCaseOverBudget(opaBinary, bundleFile, dir, cases);
    if (slow) return slow;
  }
  for (const point of points) {
    const results = all.bindings[point];
    if (!Array.isArray(results)) return `OPA gave no result for data.arbiter.${point}.decision`;
    for (const [index, item] of casesOf(point).entries()) {
      const decided: unknown = results[index];
      // An empty list: the decision is undefined for this input (Cedar may decide), which is no error.
      if (!Array.isArray(decided) || decided.length === 0) continue;
      const verdict = resultVerdict(point, decided[0]);
      if (verdict.kind === 'failed') return `${verdict.reason}, on ${item.source}`;
    }
  }
  return null;
}

/** The first case whose own evaluation fails, with OPA's errors; null when none fails alone. */
async function firstFailingCase(
  opaBinary: string,
  bundleFile: string,
  dir: string,
  cases: TrialCase[],
): Promise<string | null> {
  for (const item of cases) {
    const one = await evaluate(
      opaBinary,
      bundleFile,
      join(dir, 'trial-case.json'),
      item.input,
      `data.arbiter.${item.point}.decision`,
    );
    if ('errors' in one) return `data.arbiter.${item.point}.decision fails on ${item.source}: ${one.errors}`;
  }
  return null;
}

/**
 * Every case together took longer than a live decision may (POLICY_DECISION_TIMEOUT_MS): the first
 * case that alone does, said with its time, or null when only their sum did. Such an input would
 * fail closed at every request like it, so the write is refused instead of stored.
 */
async function firstCaseOverBudget(
  opaBinary: string,
  bundleFile: string,
  dir: string,
  cases: TrialCase[],
): Promise<string | null> {
  const budgetMs = policySandboxLimits().decisionBudgetMs;
  for (const item of cases) {
    const query = `data.arbiter.${item.point}.decision`;
    const one = await evaluate(opaBinary, bundleFile, join(dir, 'trial-case.json'), item.input, query);
    if (!('errors' in one) && one.evalMs > budgetMs)
      return `${query} took ${Math.round(one.evalMs)} ms on ${item.source}, longer than a decision may take (POLICY_DECISION_TIMEOUT_MS, ${budgetMs} ms): every request like it would fail closed`;
  }
  return null;
}

/**
 * OPA's own verdicts for `inputs` at one point, from one `opa eval` of the bundle: the engine of
 * record for the decisions a candidate's compiled module cannot make (impact analysis, shadow
 * evaluation). An evaluation error fails every input of the batch with OPA's message.
 */
export async function opaVerdicts(
  opaBinary: string,
  bundleFile: string,
  inputFile: string,
  point: DecisionPoint,
  inputs: DecisionInput[],
): Promise<RegoVerdict[]> {
  const query = `results := [[d | d := data.arbiter.${point}.decision with input as x] | some x in input.items]`;
  const answer = await evaluate(opaBinary, bundleFile, inputFile, { items: inputs }, query);
  if ('errors' in answer)
    return inputs.map(() => ({
      kind: 'failed',
      reason: `OPA could not evaluate the policy: ${answer.errors}`,
      policyFault: true,
    }));
  const results = answer.bindings.results;
  return inputs.map((_, index): RegoVerdict => {
    const decided: unknown = Array.isArray(results) ? results[index] : undefined;
    if (!Array.isArray(decided) || decided.length === 0) return { kind: 'undefined' };
    return resultVerdict(point, decided[0]);
  });
}

/**
 * `opa eval` of `query` on the bundle with `input`: the bindings of its first result and how long
 * OPA took to evaluate it (its query timer), or OPA's errors as one line.
 */
async function evaluate(
  opaBinary: string,
  bundleFile: string,
  inputFile: string,
  input: unknown,
  query: string,
): Promise<{ bindings: Record<string, unknown>; evalMs: number } | { errors: string }> {
  await writeFile(inputFile, JSON.stringify(input));
  const run = await runOpa(opaBinary, [
    'eval',
    '--metrics',
    '--bundle',
    bundleFile,
    '--input',
    inputFile,
    '--format',
    'json',
    query,
  ]);
  let output: {
    result?: { bindings?: Record<string, unknown> }[];
    errors?: unknown;
    metrics?: { timer_rego_query_eval_ns?: number };
  };
  try {
    output = JSON.parse(run.stdout) as typeof output;
  } catch {
    return { errors: `opa eval failed: ${(run.stderr || run.stdout).trim()}` };
  }
  const errors = describeOpaErrors(output.errors);
  if (errors) return { errors };
  if (run.exitCode !== 0) return { errors: `opa eval failed: ${(run.stderr || run.stdout).trim()}` };
  return {
    bindings: output.result?.[0]?.bindings ?? {},
    evalMs: (output.metrics?.timer_rego_query_eval_ns ?? 0) / 1e6,
  };
}

/**
 * Cedar on the candidate's rules and data (a policy set or entity list it cannot use fails every
 * decision), in the policy sandbox: a limit it reaches is the candidate's problem; a sandbox with
 * no thread free is thrown (503).
 */
async function cedarProblem(snapshot: PolicySnapshot, cases: TrialCase[]): Promise<string | null> {
  if (!snapshot.rules.some((rule) => rule.kind === 'cedar')) return null;
  try {
    return await policySandbox().cedarTrialProblem(snapshot, cases, policySandboxLimits().decisionBudgetMs);
  } catch (error) {
    if (error instanceof SandboxLimitError || error instanceof SandboxJobError)
      return `Cedar could not be tried: ${error.message}`;
    throw error;
  }
}
