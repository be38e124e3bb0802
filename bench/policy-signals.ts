/**
 * Events from policy against a real Arbiter (SQLite store, managed OPA, Rego in process): what a
 * policy change touching 10,000 live tokens costs (the recheck's time, from the change to the
 * revision marked rechecked) and the throughput of live traffic while it runs (goal: at least
 * 0.8x of the same load without it).
 *
 *   bash scripts/run.sh tsx bench/policy-signals.ts
 *   BENCH_SECONDS=10 BENCH_CONNECTIONS=64 bash scripts/run.sh tsx bench/policy-signals.ts
 *
 * The live tokens: one real introspection per client of CLIENTS, its audit entry and its token's
 * record copied (new ids, each pair its own `iat`) to TOKENS live tokens with a recorded
 * introspection (the recheck starts from the token records: src/signals/policy-changes.ts). The change: the pack's
 * introspect rule refusing the bench clients' tokens, and back (each move rechecks every token).
 * Throughput (client_credentials, autocannon in a child: bench/load.ts) in five windows in turn:
 * without, with a recheck running, without, with, without; the ratio is of the means.
 * This is a benchmark, not a test: it reports and exits 0.
 */
import bcrypt from 'bcryptjs';
import { CompactAuditEntries } from '../src/audit/compact.js';
import { AUDIT_LOG_COLLECTION, type AuditEntry } from '../src/audit/index.js';
import { OIDC_COLLECTION } from '../adapters/oidc/collection.js';
import { DEFAULT_TENANT } from '../src/store/index.js';
import { FORM } from '../test/support/oauth.js';
import { startTestServer, type TestServer } from '../test/support/server.js';
import { LoadGenerator, type LoadResult } from './load.js';
import { clientCredentialsWindow } from './servers.js';
import { receiverStream, tokenOf, type Client } from './signals-setup.js';
import { writeResults } from './stats.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
/** Each window of live traffic. */
const WINDOW = { connections: CONNECTIONS, seconds: SECONDS };
const TOKENS = Number(process.env.BENCH_TOKENS ?? 10_000);
const CLIENTS = 20;
const GOAL_RATIO = 0.8;

async function main(): Promise<void> {
  const startedAt = new Date();
  const server = await startTestServer({ OUTBOX_POLL_MS: '200' });
  const load = new LoadGenerator();
  try {
    await server.waitUntilReady();
    // A poll stream covering every subject: the SETs are queued for it, not pushed anywhere.
    await receiverStream(server, 'bench-receiver', { method: 'urn:ietf:rfc:8936' });
    const clients = await makeClients(server);
    await introspectOnce(server, clients);
    await copyIntrospections(server, TOKENS);
    const rule = await introspectRule(server);
    const guarded = rule.content.replace(
      'caller_entitled if {',
      'caller_entitled if {\n\tnot startswith(input.token.client_id, "signals-bench-")',
    );
    let refusing = false;
    const toggle = async () => {
      refusing = !refusing;
      return change(server, rule, refusing ? guarded : rule.content);
    };
    const idle = await toggle();
    console.log(`recheck of ${TOKENS} live tokens, idle: ${idle.seconds} s`);

    const machine = clients[0]!;
    const windows: { recheck: boolean; load: LoadResult; recheckSeconds?: number }[] = [];
    for (const withRecheck of [false, true, false, true, false]) {
      if (!withRecheck) {
        windows.push({ recheck: false, load: await clientCredentialsWindow(load, server.url, machine, WINDOW) });
        continue;
      }
      const running = toggle();
      const measured = await clientCredentialsWindow(load, server.url, machine, WINDOW);
      windows.push({ recheck: true, load: measured, recheckSeconds: (await running).seconds });
    }
    const mean = (recheck: boolean) => {
      const chosen = windows.filter((each) => each.recheck === recheck);
      return chosen.reduce((sum, each) => sum + each.load.rps, 0) / chosen.length;
    };
    const ratio = mean(true) / mean(false);
    const results = {
      tokens: TOKENS,
      replayShare: server.config.policyReplayShare,
      recheckIdleSeconds: idle.seconds,
      windows: windows.map((each) => ({
        recheck: each.recheck,
        rps: Math.round(each.load.rps),
        p99: each.load.p99,
        recheckSeconds: each.recheckSeconds,
      })),
      withoutRps: Math.round(mean(false)),
      withRps: Math.round(mean(true)),
      ratio,
      goal: ratio >= GOAL_RATIO ? 'met' : 'MISSED',
    };
    console.log(JSON.stringify(results, null, 2));
    console.log(`written to ${writeResults('policy-signals', startedAt, results)}`);
  } finally {
    load.close();
    await server.close();
  }
}

async function makeClients(server: TestServer): Promise<Client[]> {
  const clients: Client[] = [];
  for (let index = 0; index < CLIENTS; index++) {
    const client = { id: `signals-bench-${index}`, secret: `signals-bench-secret-${index}` };
    await server.admin('POST', '/clients', {
      clientId: client.id,
      clientType: 'confidential',
      clientSecret: bcrypt.hashSync(client.secret, 10),
      scopes: ['read'],
    });
    clients.push(client);
  }
  return clients;
}

/** Each client introspects its own token once (allowed): a recorded introspection of a live token. */
async function introspectOnce(server: TestServer, clients: Client[]): Promise<void> {
  const rs = { id: 'bench-rs', secret: 'signals-bench-rs-secret' };
  await server.admin('POST', '/clients', {
    clientId: rs.id,
    clientType: 'confidential',
    clientSecret: bcrypt.hashSync(rs.secret, 4),
    scopes: ['introspection'],
  });
  const caller = await tokenOf(server, rs, 'introspection');
  for (const client of clients) {
    const token = await tokenOf(server, client, 'read');
    const response = await server.request('/introspect', {
      method: 'POST',
      headers: { ...FORM, Authorization: `Bearer ${caller}` },
      body: new URLSearchParams({ token }).toString(),
    });
    const body = (await response.json()) as { active?: boolean };
    if (!body.active) throw new Error('the bench token is not active');
  }
}

/** The recorded introspections copied until there are `total`, each its own token (its own `iat`). */
async function copyIntrospections(server: TestServer, total: number): Promise<void> {
  // As the audit log reads and writes them: the repeated parts (input, decision) under their digest.
  const raw = server.store.collection<AuditEntry>(AUDIT_LOG_COLLECTION, DEFAULT_TENANT);
  const entries = new CompactAuditEntries(server.store, raw, server.config.auditRetentionDays);
  let originals: AuditEntry[] = [];
  for (let tries = 0; originals.length < CLIENTS && tries < 100; tries++) {
    const recent = await entries.find({}, { sort: { field: 'createdAt', direction: 'desc' }, limit: 1000 });
    originals = recent.filter((entry) => entry.endpoint.endsWith('/introspect') && entry.policyDecision);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  if (originals.length === 0) throw new Error('no recorded introspection');
  const copies: AuditEntry[] = [];
  for (let index = originals.length; index < total; index++) {
    const original = originals[index % originals.length]!;
    const input = structuredClone(original.policyInput) as { token: { iat: number } };
    input.token.iat -= index;
    copies.push({ ...original, id: 20_000_000 + index, policyInput: input });
  }
  for (let start = 0; start < copies.length; start += 1000) await entries.insertMany(copies.slice(start, start + 1000));
  await copyTokenRecords(server, originals, copies);
}

/** Each copied introspection's token record: the original's, with the copy's `iat` (its own key, its value unknown). */
async function copyTokenRecords(server: TestServer, originals: AuditEntry[], copies: AuditEntry[]): Promise<void> {
  type TokenDoc = { id: string; payload: Record<string, unknown>; [field: string]: unknown };
  const tokens = server.store.collection<TokenDoc>(OIDC_COLLECTION, DEFAULT_TENANT);
  const records = await tokens.find({ model: 'ClientCredentials' }, { limit: 10_000 });
  const recordOf = (entry: AuditEntry) => {
    const token = (entry.policyInput as { token: { client_id: string; iat: number } }).token;
    return { token, record: records.find((doc) => doc.payload.clientId === token.client_id) };
  };
  if (originals.some((entry) => !recordOf(entry).record)) throw new Error('a bench token has no record');
  const copied = copies.map((copy, index) => {
    const { token, record } = recordOf(copy);
    return { ...record!, id: `ClientCredentials:bench-copy-${index}`, payload: { ...record!.payload, iat: token.iat } };
  });
  for (let start = 0; start < copied.length; start += 1000) await tokens.insertMany(copied.slice(start, start + 1000));
}

async function introspectRule(server: TestServer): Promise<any> {
  const rules = (await server.admin('GET', '/policy-rules')).body as any[];
  return rules.find((rule) => rule.path.endsWith('introspect.rego'));
}

/** Writes the rule's content and waits for the recheck of the new revision to end: its time. */
async function change(server: TestServer, rule: any, content: string): Promise<{ seconds: number }> {
  const rechecks = server.store.collection<{ id: string; revision: string }>(
    { name: 'ssf_policy_rechecks' },
    DEFAULT_TENANT,
  );
  const before = (await rechecks.get('last'))?.revision;
  const started = performance.now();
  const current = (await server.admin('GET', `/policy-rules/${rule.id}`)).body;
  const { id, createdAt, updatedAt, tenantId, ...fields } = current;
  const written = await server.admin('PUT', `/policy-rules/${rule.id}`, { ...fields, content });
  if (written.status !== 200) throw new Error(`rule not written: ${JSON.stringify(written.body)}`);
  for (;;) {
    const last = (await rechecks.get('last'))?.revision;
    if (last !== undefined && last !== before) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { seconds: Math.round((performance.now() - started) / 10) / 100 };
}

await main();
