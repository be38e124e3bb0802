/**
 * How two decisions on the same input differ, in the terms an operator weighs a policy change by:
 * a request that was allowed is refused (allow_to_deny) or the reverse (deny_to_allow); an allow
 * that grants less (narrower: fewer scopes or authorization details, more obligations, a token
 * made single-use) or more (wider: the reverse); or another difference (other: a grant that loses
 * one thing and gains another, a changed obligation value or extension, another error on a deny).
 */
import type { Decision } from '../contract/types.js';

export const CHANGE_KINDS = ['allow_to_deny', 'deny_to_allow', 'narrower', 'wider', 'other'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

/** The fields of a decision that are compared (and shown as `before` and `after`), with the engine error of a fail-closed one. */
export interface ComparedDecision {
  allow: boolean;
  scopes?: string[];
  authorization_details?: unknown[];
  obligations?: Record<string, unknown>;
  extensions?: Record<string, unknown>;
  jit_single_use?: boolean;
  error?: string;
  error_description?: string;
  /** Why no engine could decide (shown, not compared: its wording depends on where the evaluation ran). */
  engineError?: string;
}

const SHOWN_FIELDS = [
  'allow',
  'scopes',
  'authorization_details',
  'obligations',
  'extensions',
  'jit_single_use',
  'error',
  'error_description',
  'engineError',
] as const;

/** A decision (an outcome's, or as the audit log recorded it with its point and engines) reduced to what is compared. */
export function comparedDecision(decision: Partial<Decision> & { engineError?: unknown }): ComparedDecision {
  const shown: Record<string, unknown> = {};
  for (const field of SHOWN_FIELDS) if (decision[field] !== undefined) shown[field] = decision[field];
  shown.allow = decision.allow === true;
  return shown as unknown as ComparedDecision;
}

/** The kind of difference between two decisions on one input; null when they are the same. */
export function changeKindOf(before: ComparedDecision, after: ComparedDecision): ChangeKind | null {
  if (before.allow !== after.allow) return before.allow ? 'allow_to_deny' : 'deny_to_allow';
  const grant = grantChange(before, after);
  const rest = ['extensions', 'error', 'error_description'] as const;
  const otherwise = rest.some((field) => canonical(before[field] ?? null) !== canonical(after[field] ?? null));
  if (!grant.less && !grant.more && !otherwise) return null;
  if (!before.allow || otherwise || (grant.less && grant.more)) return 'other';
  return grant.less ? 'narrower' : 'wider';
}

/** Whether the allow grants less and/or more: scopes and details removed or added, obligations added or removed. */
function grantChange(before: ComparedDecision, after: ComparedDecision): { less: boolean; more: boolean } {
  const scopes = setChange(before.scopes ?? [], after.scopes ?? []);
  const details = setChange(
    (before.authorization_details ?? []).map(canonical),
    (after.authorization_details ?? []).map(canonical),
  );
  // An obligation is a condition on the grant: one more narrows it, one fewer widens it, a changed value is both.
  const obligations = setChange(Object.keys(before.obligations ?? {}), Object.keys(after.obligations ?? {}));
  const changedValues = Object.keys(before.obligations ?? {}).some(
    (key) =>
      Object.hasOwn(after.obligations ?? {}, key) &&
      canonical(before.obligations![key]) !== canonical(after.obligations![key]),
  );
  const singleUse = Boolean(after.jit_single_use) !== Boolean(before.jit_single_use);
  return {
    less:
      scopes.removed ||
      details.removed ||
      obligations.added ||
      changedValues ||
      (singleUse && Boolean(after.jit_single_use)),
    more: scopes.added || details.added || obligations.removed || changedValues || (singleUse && !after.jit_single_use),
  };
}

function setChange(before: string[], after: string[]): { removed: boolean; added: boolean } {
  const was = new Set(before);
  const is = new Set(after);
  return { removed: [...was].some((item) => !is.has(item)), added: [...is].some((item) => !was.has(item)) };
}

/** JSON with sorted keys, so that equal objects compare equal whatever their key order. */
export function canonical(value: unknown): string {
  return JSON.stringify(value ?? null, (_, inner: unknown) =>
    inner && typeof inner === 'object' && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : inner,
  );
}
