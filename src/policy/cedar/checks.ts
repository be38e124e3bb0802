/**
 * Cedar's checks of policy code an operator submits: one rule on its own (the Admin API's
 * validation), and a candidate's rules and data on trial inputs. They parse and evaluate the
 * submitted text, which can be large and slow, so they run in the policy sandbox's threads
 * (src/policy/sandbox), never on the event loop.
 */
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

/** Cedar on the candidate's rules and data: a policy set or entity list it cannot use fails every decision. */
export function cedarTrialProblem(snapshot: PolicySnapshot, cases: CedarTrialCase[]): string | null {
  const driver = new CedarDriver();
  for (const item of cases) {
    const verdict = driver.evaluate(snapshot, item.point, item.input);
    if (verdict.kind === 'failed') return `Cedar cannot decide ${item.point} on ${item.source}: ${verdict.reason}`;
  }
  return null;
}
