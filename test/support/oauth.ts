import bcrypt from 'bcryptjs';
import type { TestServer } from './server.js';

export const FORM = { 'Content-Type': 'application/x-www-form-urlencoded' };

export function basic(clientId: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`;
}

/** Registers a confidential client through the Admin API; returns its plain secret. */
export async function confidentialClient(
  server: TestServer,
  clientId: string,
  fields: Record<string, unknown> = {},
  tenant?: string,
): Promise<string> {
  const secret = `${clientId}-secret-value`;
  const created = await server.admin('POST', '/clients', {
    clientId,
    clientType: 'confidential',
    clientSecret: bcrypt.hashSync(secret, 4),
    ...(tenant ? { tenantId: tenant } : {}),
    ...fields,
  });
  if (created.status !== 201) throw new Error(`client ${clientId} not created: ${JSON.stringify(created.body)}`);
  return secret;
}

export interface JsonResponse {
  status: number;
  body: any;
  headers: Headers;
}

/** POSTs a form to the server and parses the JSON answer. */
export async function postForm(
  server: TestServer,
  path: string,
  form: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<JsonResponse> {
  const response = await server.request(path, {
    method: 'POST',
    headers: { ...FORM, ...headers },
    body: new URLSearchParams(form).toString(),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

/**
 * POST /token with grant_type=client_credentials, the client authenticated with
 * client_secret_basic; `form` adds scope, resource and the like, `headers` a tenant or a request id.
 */
export function clientCredentials(
  server: TestServer,
  clientId: string,
  secret: string,
  form: Record<string, string> = {},
  headers: Record<string, string> = {},
): Promise<JsonResponse> {
  return postForm(
    server,
    '/token',
    { grant_type: 'client_credentials', ...form },
    { Authorization: basic(clientId, secret), ...headers },
  );
}

/** The access token of a client_credentials request that has to succeed: for tests about what the token is then used for. */
export async function clientToken(
  server: TestServer,
  clientId: string,
  secret: string,
  form: Record<string, string> = {},
  headers: Record<string, string> = {},
): Promise<string> {
  const { status, body } = await clientCredentials(server, clientId, secret, form, headers);
  if (status !== 200) throw new Error(`no client_credentials token for ${clientId}: ${status} ${JSON.stringify(body)}`);
  return body.access_token;
}

/** A confidential client registered with `scopes` (and `fields`), and a client_credentials token of it for all of them. */
export async function clientWithToken(
  server: TestServer,
  clientId: string,
  scopes: string[],
  fields: Record<string, unknown> = {},
  tenant?: string,
): Promise<{ secret: string; token: string }> {
  const secret = await confidentialClient(server, clientId, { scopes, ...fields }, tenant);
  const token = await clientToken(
    server,
    clientId,
    secret,
    { scope: scopes.join(' ') },
    tenant ? { 'X-Tenant-Id': tenant } : {},
  );
  return { secret, token };
}

/** Replaces a field of the default policy data entry `oauth` and waits until OPA has activated the new bundle. */
export async function updateOauthData(server: TestServer, change: (data: any) => void): Promise<void> {
  const entries = (await server.admin('GET', '/policy-data?bundledOnly=true')).body as any[];
  const oauth = entries.find((entry) => entry.dataKey === 'oauth');
  const data = JSON.parse(oauth.payload);
  change(data);
  const saved = await server.admin('PUT', `/policy-data/by-key?dataKey=oauth`, {
    dataKey: 'oauth',
    payload: JSON.stringify(data),
  });
  if (saved.status !== 200) throw new Error(`policy data not saved: ${JSON.stringify(saved.body)}`);
  await policyInForce(server);
}

/**
 * Waits until OPA has activated the bundle revision the store holds now (GET /healthz reports
 * both), so that a test sees the policy it just wrote rather than the one before; with
 * `inProcess`, until the in-process engine decides with it too (its Wasm is built in the
 * background: until then OPA decides, and a decision's record says which engine took it).
 */
export async function policyInForce(
  server: TestServer,
  timeoutMs = 20_000,
  { inProcess = false }: { inProcess?: boolean } = {},
): Promise<void> {
  const revisions = async () =>
    (
      (await (await server.request('/healthz')).json()) as {
        policyRevision?: { store: string; opa: string | null; inProcess?: string | null };
      }
    ).policyRevision;
  // Revisions only move forward with writes: once OPA serves what the store holds, it has this write too.
  await eventually(
    async () => {
      const now = await revisions();
      return (
        now !== undefined && now.opa !== null && now.opa === now.store && (!inProcess || now.inProcess === now.store)
      );
      // OPA long-polls the bundle: a write is in force within a few hundred ms, so ask often.
    },
    timeoutMs,
    100,
  );
}

/**
 * Retries `probe` every `stepMs` until it returns true or the time is up (policy changes land at
 * the next bundle poll): what a test waits on instead of a fixed sleep.
 */
export async function eventually(
  probe: () => boolean | Promise<boolean>,
  timeoutMs = 15_000,
  stepMs = 250,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe()) return;
    await new Promise((resolve) => setTimeout(resolve, stepMs));
  }
  throw new Error('condition not met in time');
}
