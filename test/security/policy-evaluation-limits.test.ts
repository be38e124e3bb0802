import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { clientCredentials, confidentialClient } from '../support/oauth.js';
import { LOOP_HELD_BOUND_MS, loopDelays, probingLivez, type LivezProbe } from '../support/livez-probes.js';
import { inTenant, readyServer, type TestServer } from '../support/server.js';

/** The time limit of one sandbox job on this server: far below the costly candidate's cost. */
const TIMEOUT_MS = 4000;
/** The memory of a sandbox thread (and of each OPA module it loads) on this server. */
const MEMORY_MB = 128;
/** Between two probes. */
const PAUSE_MS = 20;

const TOKEN_RULE = 'arbiter/token/token.rego';
const PACK_TOKEN_RULE = readFileSync(new URL('../../policies/arbiter/token/token.rego', import.meta.url), 'utf8');

/**
 * The pack's token rule, deciding as before, with a condition on client_credentials that costs
 * `cost` when the client is `clientId` and nothing for any other client (the contract's examples,
 * the recent inputs a write is tried on).
 */
function candidateCostlyFor(clientId: string, cost: string): string {
  const rule = PACK_TOKEN_RULE.replace(
    '} else := client_credentials if {\n\tinput.request.grant_type == "client_credentials"\n',
    '} else := client_credentials if {\n\tinput.request.grant_type == "client_credentials"\n\tnot costly\n',
  );
  expect(rule).not.to.equal(PACK_TOKEN_RULE);
  // Costly on the client's requests for "read" only: its latest request asks for "other", so that a
  // write's stratified trial (the latest input of every client) does not run into it; a replay does.
  return `${rule}\ncostly if {\n\tinput.client.client_id == "${clientId}"\n\tinput.request.scopes[_] == "read"\n${cost}\n}\n`;
}

/**
 * About 60 million steps of OPA's Wasm (seconds, on any machine) on one input, allocating nothing
 * (so that only the time limit stops it): three nested loops over a range, never true.
 */
const CUBIC = [
  '\tr := numbers.range(1, 500)',
  '\tsome i in r',
  '\tsome j in r',
  '\tsome k in r',
  '\ti < j',
  '\tj < k',
  '\tk < i',
].join('\n');
/** Strings that grow a thousandfold at each step: the third needs hundreds of MB, the fourth hundreds of GB. */
const UNBOUNDED = [
  '\ts := concat("", [input.client.client_id | some i in numbers.range(1, 64)])',
  '\tt := concat("", [s | some i in numbers.range(1, 1024)])',
  '\tu := concat("", [t | some i in numbers.range(1, 1024)])',
  '\tv := concat("", [u | some i in numbers.range(1, 1024)])',
  '\tcount(v) == 1',
].join('\n');

/**
 * Every probe was answered 200, none waited for the event loop as long as LOOP_HELD_BOUND_MS, and there
 * were enough of them to have watched the work (`atLeast`: a memory limit stops it within a few
 * hundred ms, so fewer probes see it than a time limit's seconds).
 */
function expectLoopFree(probes: LivezProbe[], atLeast = 11): void {
  expect(Math.max(...loopDelays(probes))).to.be.lessThan(LOOP_HELD_BOUND_MS);
  expect(
    probes.filter((probe) => probe.status !== 200),
    'probes of /livez not answered 200 (0: dropped)',
  ).to.have.length(0);
  expect(probes.length, 'probes while the work ran').to.be.at.least(atLeast);
}

/** The figures reported: probes, the longest wait for the loop, and the raw latencies. */
function described(probes: LivezProbe[]): string {
  const latencies = probes.map((probe) => probe.ms).sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))]!.toFixed(1);
  return `${probes.length} probes, longest wait for the event loop ${Math.max(...loopDelays(probes)).toFixed(1)} ms; latency p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms`;
}

/**
 * A large Cedar rule, slow to parse (seconds for a few hundred KB): many policies, each a chain
 * of extension calls.
 */
function largeCedarRule(policies: number): string {
  const one = (index: number) =>
    `permit(principal, action == Arbiter::Action::"token", resource) when { ${Array.from(
      { length: 20 },
      (_, k) => `decimal("${k}.${index % 9999}").lessThan(decimal("99.0"))`,
    ).join(' && ')} };`;
  return Array.from({ length: policies }, (_, index) => one(index)).join('\n');
}

/**
 * Issue 33, items 2 and 3: policy code an operator submits (a candidate replayed by impact
 * analysis, a Cedar rule validated) is evaluated off the event loop, within a time limit and a
 * memory limit. While it runs, /livez of the same server (the same process, the same event loop
 * as this test) answers in milliseconds; past a limit the request gets a clear answer naming it,
 * and the server keeps serving.
 */
describe('Hostile: policy code that is costly to evaluate', function () {
  this.timeout(120_000);
  let server: TestServer;
  let tenant: TestServer;
  const secrets: Record<string, string> = {};

  const probing = <T>(work: Promise<T>) => probingLivez(server, work, PAUSE_MS);

  async function token(clientId: string): Promise<void> {
    const answer = await clientCredentials(tenant, clientId, secrets[clientId]!, { scope: 'read' });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
  }

  /**
   * Recorded decisions of `clientId` first, then one of its own asking for "other" (the latest of
   * its pair, which a write's stratified trial takes), then another client's (the newest input):
   * the trial does not see the costly ones; a replay of the recorded decisions does.
   */
  async function recordedThenHidden(clientId: string, count: number): Promise<void> {
    for (let n = 0; n < count; n += 1) await token(clientId);
    const other = await clientCredentials(tenant, clientId, secrets[clientId]!, { scope: 'other' });
    expect(other.status, JSON.stringify(other.body)).to.equal(200);
    await token('cheap');
  }

  const impactOf = (clientId: string, cost: string) =>
    tenant.admin('POST', '/policy-impact', {
      changes: [
        {
          collection: 'policy-rules',
          op: 'replace',
          record: { version: null, kind: 'rego', path: TOKEN_RULE, content: candidateCostlyFor(clientId, cost) },
        },
      ],
    });

  before(async function () {
    // Its own server: its sandbox limits, and a write tried on the newest recorded input of each point only.
    server = await readyServer({
      // Above the default 256 KB rule limit (policy-sandbox.test.ts shows it): here the large rule must be parsed.
      POLICY_RULE_MAX_BYTES: String(1024 * 1024),
      POLICY_SANDBOX_TIMEOUT_MS: String(TIMEOUT_MS),
      POLICY_SANDBOX_MEMORY_MB: String(MEMORY_MB),
      POLICY_CHECK_RECORDED_INPUTS: '1',
    });
    tenant = inTenant(server, 'evaluation-limits');
    for (const clientId of ['slow', 'hog', 'cheap'])
      secrets[clientId] = await confidentialClient(
        tenant,
        clientId,
        { scopes: ['read', 'other'] },
        'evaluation-limits',
      );
  });
  after(async function () {
    await server?.close();
  });

  it('replays a candidate costly on older recorded inputs off the event loop: /livez answers in milliseconds, the replay stops at the time limit with a 422 naming it', async function () {
    await recordedThenHidden('slow', 3);
    const { result, ms, probes } = await probing(impactOf('slow', CUBIC));
    console.log(
      `      /livez while the costly candidate was replayed: ${described(probes)}; the call took ${Math.round(ms)} ms`,
    );
    expectLoopFree(probes);
    expect(result.status, JSON.stringify(result.body)).to.equal(422);
    expect(result.body).to.include({ error: 'invalid_request', limit: 'time' });
    expect(result.body.error_description).to.contain(`POLICY_SANDBOX_TIMEOUT_MS=${TIMEOUT_MS}`);
    // The check of the change, two compilations, then at most a time limit or two (the live revision's batch waits its turn).
    expect(ms).to.be.lessThan(TIMEOUT_MS * 2 + 20_000);
    // The thread was replaced: the next replay works, on the same decisions, with a cheap candidate.
    const cheap = await impactOf('nobody', CUBIC);
    expect(cheap.status, JSON.stringify(cheap.body)).to.equal(200);
    expect(cheap.body.changed).to.deep.equal([]);
  });

  it('parses a large Cedar rule sent to validate off the event loop: /livez answers in milliseconds, the answer is clear', async function () {
    const content = largeCedarRule(400);
    expect(content.length).to.be.greaterThan(300_000);
    const { result, ms, probes } = await probing(
      server.admin('POST', '/policy-rules/validate', {
        version: null,
        kind: 'cedar',
        path: 'arbiter/large.cedar',
        content,
      }),
    );
    console.log(
      `      /livez while a ${Math.round(content.length / 1024)} KB Cedar rule was validated: ${described(probes)}; the call took ${Math.round(ms)} ms`,
    );
    expectLoopFree(probes);
    // Valid Cedar: 200, unless a parse took longer than the limit on this machine (then a 400 naming it).
    if (result.status === 400) expect(result.body.error_description).to.contain('POLICY_SANDBOX_TIMEOUT_MS');
    else expect(result.status, JSON.stringify(result.body)).to.equal(200);
    // The rule parsed alone, then the bundle's Cedar tried with it: two jobs, each within the limit.
    expect(ms).to.be.lessThan(TIMEOUT_MS * 2 + 10_000);
  });

  it("checks policy data against its author's schema off the event loop: a schema costly to run is stopped at the time limit with a 400 naming it, nothing stored", async function () {
    // Ajv's secure meta-schema passes it, yet checking n objects unique takes time growing with n² (seconds for 30,000).
    const schema = JSON.stringify({ type: 'array', uniqueItems: true, maxItems: 1_000_000 });
    const payload = JSON.stringify(Array.from({ length: 30_000 }, (_, index) => ({ a: index })));
    const { result, ms, probes } = await probing(
      server.admin('PUT', '/policy-data/by-key?dataKey=unique_things', { dataKey: 'unique_things', payload, schema }),
    );
    console.log(
      `      /livez while data was checked against a costly schema: ${described(probes)}; the call took ${Math.round(ms)} ms`,
    );
    expectLoopFree(probes);
    expect(result.status, JSON.stringify(result.body)).to.equal(400);
    expect(result.body.error_description)
      .to.contain('could not be checked against its schemas')
      .and.contain(`POLICY_SANDBOX_TIMEOUT_MS=${TIMEOUT_MS}`);
    expect(ms).to.be.lessThan(TIMEOUT_MS + 10_000);
    const stored = (await server.admin('GET', '/policy-data?q=unique_things')).body as unknown[];
    expect(stored).to.deep.equal([]);
    // A schema as cheap as it should be still checks, in the same sandbox.
    const cheap = await server.admin('PUT', '/policy-data/by-key?dataKey=unique_things', {
      dataKey: 'unique_things',
      payload: JSON.stringify([1, 2, 2]),
      schema,
    });
    expect(cheap.status, JSON.stringify(cheap.body)).to.equal(400);
    expect(cheap.body.error_description).to.match(/must NOT have duplicate items/);
  });

  it('stops a candidate that allocates without bound at the memory limit with a 422 naming it, and keeps serving', async function () {
    await recordedThenHidden('hog', 1);
    const { result, probes } = await probing(impactOf('hog', UNBOUNDED));
    console.log(`      /livez while the unbounded candidate was replayed: ${described(probes)}`);
    expectLoopFree(probes, 3);
    expect(result.status, JSON.stringify(result.body)).to.equal(422);
    expect(result.body).to.include({ error: 'invalid_request', limit: 'memory' });
    expect(result.body.error_description).to.contain(`POLICY_SANDBOX_MEMORY_MB=${MEMORY_MB}`);
    await token('cheap');
    const cheap = await impactOf('nobody', UNBOUNDED);
    expect(cheap.status, JSON.stringify(cheap.body)).to.equal(200);
  });
});
