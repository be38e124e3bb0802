/**
 * The check of every decision result against RESULT_SCHEMA (schemas.ts), without Ajv: the
 * validator is the schema compiled ahead of time (result-validator.generated.ts, written by
 * scripts/result-validator.ts). A decision thread (src/policy/live/thread.ts) checks each result
 * it makes and starts again after a runaway decision is ended: loading Ajv and compiling the
 * schema there cost about 70 ms of CPU per thread start.
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { validate } from './result-validator.generated.js';

const validateResult = validate as ValidateFunction;

/** Null when a policy result fits RESULT_SCHEMA, else a short description of the first problem. */
export function checkResult(result: unknown): string | null {
  return validateResult(result) ? null : describeProblem(validateResult.errors?.[0]);
}

/** Where and why a value does not fit its schema, from Ajv's first error. */
export function describeProblem(error: ErrorObject | undefined): string {
  if (!error) return 'invalid';
  const where = error.instancePath || '(root)';
  const missing =
    error.keyword === 'required' ? ` (${(error.params as { missingProperty: string }).missingProperty})` : '';
  return `${where} ${error.message ?? 'is invalid'}${missing}`;
}
