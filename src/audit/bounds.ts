import type { AuditFields } from './entry.js';

/** The longest string an unauthenticated caller gets kept in an audit entry (User-Agent, client_id, redirect_uri, scope, path, …). */
export const MAX_AUDITED_STRING = 256;
/** The most items of a list (parameter names) or fields of an object kept from an unauthenticated request. */
export const MAX_AUDITED_ITEMS = 32;
const MAX_DEPTH = 4;

/**
 * The entry of a request nobody authenticated, with every string the caller chose cut to
 * MAX_AUDITED_STRING characters and every list to MAX_AUDITED_ITEMS items: a caller without
 * credentials must not decide how much the audit log stores for it (a 7 KB User-Agent and
 * 3,000-character parameters once made ~22 KB a request). A cut value ends with "…".
 */
export function boundedEntry(entry: AuditFields): AuditFields {
  return {
    ...entry,
    endpoint: clip(entry.endpoint),
    method: clip(entry.method),
    requestSummary: bounded(entry.requestSummary, 0) as Record<string, unknown>,
    tenantId: clipOrNull(entry.tenantId),
    clientId: clipOrNull(entry.clientId),
    subjectId: clipOrNull(entry.subjectId),
    ip: clipOrNull(entry.ip),
    userAgent: clipOrNull(entry.userAgent),
    requestId: clipOrNull(entry.requestId),
  };
}

export function clip(value: string): string {
  return value.length > MAX_AUDITED_STRING ? `${value.slice(0, MAX_AUDITED_STRING)}…` : value;
}

function clipOrNull(value: string | null): string | null {
  return value === null ? null : clip(value);
}

function bounded(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return clip(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '…';
  if (Array.isArray(value)) {
    const kept = value.slice(0, MAX_AUDITED_ITEMS).map((item) => bounded(item, depth + 1));
    return value.length > MAX_AUDITED_ITEMS ? [...kept, `… ${value.length - MAX_AUDITED_ITEMS} more`] : kept;
  }
  const fields = Object.entries(value);
  const kept = fields.slice(0, MAX_AUDITED_ITEMS).map(([name, item]) => [clip(name), bounded(item, depth + 1)]);
  return Object.fromEntries(
    fields.length > MAX_AUDITED_ITEMS ? [...kept, ['…', `${fields.length - MAX_AUDITED_ITEMS} more`]] : kept,
  );
}

/**
 * The entry with every U+0000 (in a string or a key, at any depth) replaced by U+FFFD: the edge
 * refuses it in requests (refuseNul), but a refused request's entry still quotes what was sent,
 * and a policy can build one; PostgreSQL refuses it (SQLSTATE 22P05), and the entry must be written.
 */
export function withoutNul(entry: AuditFields): AuditFields {
  // A walk that allocates nothing finds none in almost every entry (this runs for each of them).
  return holdsNul(entry) ? (nulReplaced(entry) as AuditFields) : entry;
}

function holdsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes(NUL);
  if (!isPlainContainer(value)) return false;
  if (Array.isArray(value)) {
    for (const item of value) if (holdsNul(item)) return true;
    return false;
  }
  for (const key in value) if (key.includes(NUL) || holdsNul(value[key])) return true;
  return false;
}

function nulReplaced(value: unknown): unknown {
  if (typeof value === 'string') return value.replaceAll(NUL, '\ufffd');
  if (!isPlainContainer(value)) return value;
  if (Array.isArray(value)) return value.map(nulReplaced);
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [nulReplaced(key), nulReplaced(item)]));
}

/** Arrays and plain objects; anything else (a Date, …) is written as JSON writes it, and left as it is. */
function isPlainContainer(value: unknown): value is Record<string, unknown> | unknown[] {
  if (value === null || typeof value !== 'object') return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return Array.isArray(value) || prototype === Object.prototype || prototype === null;
}

const NUL = '\u0000';
