/**
 * Shared Signals delivery against a real Arbiter (one node, SQLite store, managed OPA): how many
 * Security Event Tokens per second the durable outbox delivers to a push receiver (RFC 8935), and
 * the time from the change to each SET's receipt (p50, p99).
 *
 *   bash scripts/run.sh tsx bench/signals-delivery.ts
 *   BENCH_EVENTS=5000 BENCH_ROUNDS=5 BENCH_OUTBOX_POLL_MS=200 bash scripts/run.sh tsx bench/signals-delivery.ts
 *
 * The events: an identity provider with BENCH_EVENTS subjects, disabled by one Admin call, which
 * appends a CAEP session-revoked per subject to the outbox before it answers (at most 10,000);
 * enabled again between rounds (which emits nothing). The receiver: a push endpoint on loopback
 * in this process (test/support/ssf-receiver.ts) that verifies every SET against the tenant's
 * jwks_uri before answering 202, as a receiver must. Each round counts from the Admin call to the
 * last SET received. This is a benchmark, not a test: it reports and exits 0.
 */
import { startTestServer, type TestServer } from '../test/support/server.js';
import { PushReceiver, SetVerifier } from '../test/support/ssf-receiver.js';
import { receiverStream } from './signals-setup.js';
import { median, percentile, writeResults } from './stats.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const POLL_MS = process.env.BENCH_OUTBOX_POLL_MS;
/** Subjects made at once through the Admin API. */
const PARALLEL_WRITES = 20;

interface Round {
  events: number;
  /** How long the Admin call that disabled the provider took to answer (its events appended). */
  answeredMs: number;
  seconds: number;
  eventsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  // The server's own outbox settings unless the run names some (OUTBOX_POLL_MS: how long a node
  // waits between rounds of `batch` entries when nothing woke it).
  const server = await startTestServer(POLL_MS ? { OUTBOX_POLL_MS: POLL_MS } : {});
  const receiver = new PushReceiver();
  try {
    await server.waitUntilReady();
    const { issuer } = server.config;
    receiver.verifier = new SetVerifier(`${issuer}/.well-known/jwks.json`, issuer, 'bench-push-receiver');
    await receiverStream(server, 'bench-push-receiver', {
      method: 'urn:ietf:rfc:8935',
      endpoint_url: await receiver.start(),
    });
    const provider = await identityProvider(server);
    await makeSubjects(server, provider.id);
    const rounds: Round[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await setEnabled(server, provider, true);
      const before = receiver.received.length;
      const started = Date.now();
      await setEnabled(server, provider, false);
      const answeredMs = Date.now() - started;
      const sets = (await receiver.setsReceived(before + EVENTS)).slice(before);
      const took = sets.map((set) => set.receivedAt - started).sort((a, b) => a - b);
      const seconds = (took.at(-1)! || 1) / 1000;
      rounds.push({
        events: sets.length,
        answeredMs,
        seconds,
        eventsPerSecond: Math.round(sets.length / seconds),
        p50Ms: percentile(took, 50),
        p99Ms: percentile(took, 99),
        maxMs: took.at(-1)!,
      });
      console.log(JSON.stringify({ round, ...rounds.at(-1) }));
    }
    const outbox = (await server.admin('GET', '/outbox')).body as { pending: number; delivered: number };
    const results = {
      events: EVENTS,
      outboxPollMs: server.config.outboxPollMs,
      rounds,
      eventsPerSecondMedian: median(rounds.map((each) => each.eventsPerSecond)),
      p50MsMedian: median(rounds.map((each) => each.p50Ms)),
      p99MsMedian: median(rounds.map((each) => each.p99Ms)),
      outboxAfter: { pending: outbox.pending, delivered: outbox.delivered },
    };
    console.log(JSON.stringify(results, null, 2));
    console.log(`written to ${writeResults('signals-delivery', startedAt, results)}`);
  } finally {
    await receiver.close();
    await server.close();
  }
}

interface Provider {
  id: number;
  idpId: string;
  [field: string]: unknown;
}

async function identityProvider(server: TestServer): Promise<Provider> {
  const created = await server.admin('POST', '/identity-providers', {
    issuer: 'https://idp.bench.example',
    idpId: 'bench-idp',
    name: 'Bench sign-in',
    clientId: 'arbiter',
    clientSecret: 'bench-upstream-secret',
    scopes: ['openid', 'email'],
  });
  if (created.status !== 201) throw new Error(`identity provider not created: ${JSON.stringify(created.body)}`);
  return created.body as Provider;
}

async function makeSubjects(server: TestServer, identityProviderId: number): Promise<void> {
  for (let start = 0; start < EVENTS; start += PARALLEL_WRITES) {
    const indexes = Array.from({ length: Math.min(PARALLEL_WRITES, EVENTS - start) }, (_, offset) => start + offset);
    await Promise.all(
      indexes.map(async (index) => {
        const made = await server.admin('POST', '/subjects', {
          subjectId: `bench-user-${index}`,
          identityProviderId,
          name: `Bench user ${index}`,
        });
        if (made.status !== 201) throw new Error(`subject not created: ${JSON.stringify(made.body)}`);
      }),
    );
  }
}

/** The provider enabled or disabled, as an operator does it (the whole record PUT back). */
async function setEnabled(server: TestServer, provider: Provider, enabled: boolean): Promise<void> {
  const current = (await server.admin('GET', `/identity-providers/${provider.idpId}`)).body as Record<string, unknown>;
  if (current.enabled === enabled) return;
  const { id, createdAt, updatedAt, tenantId, ...fields } = current;
  const written = await server.admin('PUT', `/identity-providers/${provider.idpId}`, { ...fields, enabled });
  if (written.status !== 200) throw new Error(`identity provider not written: ${JSON.stringify(written.body)}`);
}

await main();
