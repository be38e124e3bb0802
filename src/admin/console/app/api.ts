import { SESSION_SIGN_IN, session, type Caller } from './session.js';

/** An Admin API refusal: `field` names the offending field when the API says which. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    description: string,
    readonly field?: string,
  ) {
    super(description);
  }
}

let onUnauthorized: () => void = () => {};

/** What to do when the key is refused (sign the operator out). */
export function whenUnauthorized(handler: () => void): void {
  onUnauthorized = handler;
}

/** One Admin API call: the key and the chosen tenant as headers, JSON both ways. */
export function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  return call<T>(method, path, body, onUnauthorized);
}

/** Whose key the session holds (one harmless read), or null when the API refuses it; a refusal here signs no one out. */
export async function callerOfKey(): Promise<Caller | null> {
  try {
    return await call<Caller>('GET', '/api-keys/current', undefined, () => {});
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

/** One page of an Admin API list: its records, how many match in all (X-Total-Count), whether more follow. */
export interface ListPage<T> {
  items: T[];
  total: number;
  /** More match than `total` says: the server counts up to 10,000 (X-Total-Count-Capped). */
  capped: boolean;
  hasNext: boolean;
}

/** GET of a list (`query`: offset, limit, q, …), with its total and whether a next page exists. */
export async function apiList<T>(path: string, query: Record<string, string>): Promise<ListPage<T>> {
  const { parsed, response } = await send('GET', `${path}?${new URLSearchParams(query)}`, undefined, onUnauthorized);
  const items = parsed as T[];
  const total = Number(response.headers.get('X-Total-Count') ?? items.length);
  const capped = response.headers.get('X-Total-Count-Capped') === 'true';
  return { items, total, capped, hasNext: /rel="next"/.test(response.headers.get('Link') ?? '') };
}

async function call<T>(method: string, path: string, body: unknown, unauthorized: () => void): Promise<T> {
  return (await send(method, path, body, unauthorized)).parsed as T;
}

async function send(
  method: string,
  path: string,
  body: unknown,
  unauthorized: () => void,
): Promise<{ parsed: unknown; response: Response }> {
  const withSession = session.key() === SESSION_SIGN_IN;
  // Signed in through the identity provider, the session cookie goes by itself; a key is a header.
  const headers: Record<string, string> = withSession ? {} : { 'X-Admin-API-Key': session.key() ?? '' };
  if (session.tenant()) headers['X-Tenant-Id'] = session.tenant();
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  // The console's own reads are marked, for the audit log's list to leave them out (the server marks
  // only GETs); with the session cookie, writes carry it too (the server refuses a cookie-only write).
  if (method === 'GET' || withSession) headers['X-Arbiter-Console'] = '1';
  const response = await fetch(`/admin/api${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
  });
  const text = await response.text();
  const parsed = text ? parseJson(text) : undefined;
  if (response.ok) return { parsed, response };
  if (response.status === 401) unauthorized();
  const problem = (parsed ?? {}) as { error?: string; error_description?: string; field?: string };
  throw new ApiError(
    response.status,
    problem.error ?? 'error',
    problem.error_description ?? `the server answered ${response.status}`,
    problem.field,
  );
}

export interface Revisions {
  store: string;
  opa: string | null;
}

/** A decision point the policy in force could not decide (GET /healthz's policyFaults). */
export interface PolicyFault {
  point: string;
  error: string;
  at: string;
  failing: boolean;
  decisions: number | null;
  failed: number | null;
}

/** What GET /healthz says (no key needed). */
export interface Health {
  status: string;
  policy?: string;
  policyFaults?: PolicyFault[];
  policyRevision?: Revisions;
}

export async function serverHealth(): Promise<Health> {
  const response = await fetch('/healthz', { cache: 'no-store' });
  return (await response.json()) as Health;
}

/** The bundle revision the store holds and the one OPA serves (GET /healthz, no key needed). */
export async function policyRevisions(): Promise<Revisions | undefined> {
  return (await serverHealth()).policyRevision;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { error: 'error', error_description: text.slice(0, 200) };
  }
}
