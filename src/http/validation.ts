import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { badRequest, shownName } from './errors.js';

const BCRYPT = /^\$2[aby]\$\d{2}\$[./A-Za-z0-9]{53}$/;
/** BCrypt reads at most 72 bytes of a secret: a longer one would be cut without a word. */
const MAX_SECRET_BYTES = 72;

/** True for a BCrypt hash ($2a$, $2b$, $2y$). */
export function isBcryptHash(value: string): boolean {
  return BCRYPT.test(value);
}

/** One ajv instance for every request schema, with the formats Arbiter's bodies use. */
export const ajv = new Ajv({ allErrors: false, strict: false });
(addFormats as unknown as (ajv: Ajv) => void)(ajv);
ajv.addFormat('client-secret', {
  type: 'string',
  validate: (value: string) => isBcryptHash(value) || (value !== '' && Buffer.byteLength(value) <= MAX_SECRET_BYTES),
});

const compiled = new WeakMap<object, ValidateFunction>();

/** Validates a body against a schema; the 400 names the offending field and what is wrong with it. */
export function assertValid<T>(schema: object, body: unknown, what = 'the request body'): asserts body is T {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  if (!validate(body)) throw badRequest(...describeError(validate.errors?.[0], what));
}

function describeError(error: ErrorObject | undefined, what: string): [string, { field?: string }] {
  if (!error) return [`${what} is invalid`, {}];
  // Names the caller chose (a path, an unknown field) are cut: a refusal never echoes a whole body.
  const path = shownName(error.instancePath.replace(/^\//, '').replace(/\//g, '.'));
  if (error.keyword === 'additionalProperties') {
    const field = shownName(
      [path, (error.params as { additionalProperty: string }).additionalProperty].filter(Boolean).join('.'),
    );
    return [`${field} is not a known field`, { field }];
  }
  if (error.keyword === 'required') {
    const field = [path, (error.params as { missingProperty: string }).missingProperty].filter(Boolean).join('.');
    return [`${field} is required`, { field }];
  }
  if (error.keyword === 'format' && (error.params as { format: string }).format === 'client-secret') {
    return [
      `${path} must be the secret in clear, 1 to ${MAX_SECRET_BYTES} bytes (BCrypt reads no more), or a BCrypt hash ($2a$, $2b$ or $2y$)`,
      { field: path },
    ];
  }
  if (!path) return [`${what} ${error.message ?? 'is invalid'}`, {}];
  return [`${path} ${error.message ?? 'is invalid'}`, { field: path }];
}
