/**
 * Cedar's checks of policy code an operator submits: one rule on its own (the Admin API's
 * validation), and a candidate's rules and data on trial inputs. They parse and evaluate the
 * submitted text, which can be large and slow, so they run in the policy sandbox's threads
 * (src/policy/sandbox), never on the event loop.
 */
import { performance } from 'node:perf_hooks';
import type { PolicySnapshot } from '../bundle/build.js';
import type { DecisionInput, DecisionPoint } from '../contract/types.js';
import { CedarDriver } from './driver.js';
import { cedar, formatCedarErrors } from './wasm.js';

/** An input a candidate is tried on, and where it comes from (for the message). */
export interface CedarTrialCase {
  point: DecisionPoint;
  input: DecisionInput;
  source: string;
}

/** Null when the rule is valid Cedar (static policies only), else the message of the Admin API's 400. */
export function cedarRuleProblem(content: string): string | null {
  const parts = cedar().policySetTextToParts(content);
  if (parts.type === 'failure') return `Cedar parse error: ${formatCedarErrors(parts.errors, content)}`;
  if (parts.policy_templates.length > 0) return 'Cedar templates are not supported: a rule holds static policies only';
  const checked = cedar().checkParsePolicySet({ staticPolicies: content });
  return checked.type === 'failure' ? `Cedar parse error: ${formatCedarErrors(checked.errors, content)}` : null;
}

/**
 * Cedar on the candidate's rules and data: a policy set or entity list it cannot use fails every
 * decision, and so does one Cedar cannot use within a decision's time (`budgetMs`,
 * POLICY_DECISION_TIMEOUT_MS). A live decision thread compiles the set within the first decision
 * it makes of a revision, so the first case is timed with the compile, as live.
 */
export function cedarTrialProblem(snapshot: PolicySnapshot, cases: CedarTrialCase[], budgetMs: number): string | null {
  const driver = new CedarDriver();
  for (const [index, item] of cases.entries()) {
    const started = performance.now();
    const verdict = driver.evaluate(snapshot, item.point, item.input);
    const ms = performance.now() - started;
    if (verdict.kind === 'failed') return `Cedar cannot decide ${item.point} on ${item.source}: ${verdict.reason}`;
    if (ms > budgetMs)
      return `Cedar took ${Math.round(ms)} ms to ${index === 0 ? 'compile the policy set and ' : ''}decide ${item.point} on ${item.source}, longer than a decision may take (POLICY_DECISION_TIMEOUT_MS, ${budgetMs} ms): every request like it would fail closed`;
  }
  return null;
}
