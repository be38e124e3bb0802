import { isSharedPart, joinShared } from '../policy/index.js';

/**
 * The inputs (or decisions) an entry's policyInput (policyDecision) holds, in order: one, the
 * shared part with each one's own (several decisions), or a list (entries written before the
 * shared part was kept once). Null when it holds none.
 */
export function eachRecorded(recorded: unknown): unknown[] | null {
  if (recorded === null || recorded === undefined) return null;
  if (isSharedPart(recorded)) return joinShared(recorded);
  return Array.isArray(recorded) ? recorded : [recorded];
}
