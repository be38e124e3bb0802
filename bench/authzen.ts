/**
 * AuthZEN PDP cost against a real Arbiter (SQLite store, managed OPA), all on 127.0.0.1, with the
 * document-sharing policy of test/authzen/sharing.ts, compared in the same run with Bearer
 * introspection (one token lookup plus one policy decision: the cheapest comparable call).
 *
 *   npm run bench:authzen                              5 s per concurrent scenario, 10 connections
 *   BENCH_SECONDS=10 BENCH_CONNECTIONS=20 npm run bench:authzen
 *   BENCH_SEQUENTIAL_REQUESTS=500 npm run bench:authzen   timed requests per sequential scenario
 *
 * Scenarios: POST /introspect (Bearer caller), POST /access/v1/evaluation (one fixed evaluation:
 * bob edits the plan), POST /access/v1/evaluations (100 items, the rows of DECISION_TABLE over and
 * over), POST /access/v1/search/subject (who may edit the plan). Every AuthZEN call carries the
 * Bearer token of 'pep' (scope authzen): Basic would pay a bcrypt comparison per call.
 *
 * Each scenario runs twice: sequentially (one keep-alive connection, the scenarios interleaved
 * request by request, BENCH_SEQUENTIAL_REQUESTS requests each timed with hrtime, after a warm-up),
 * then under load (autocannon, BENCH_CONNECTIONS connections, latency in whole milliseconds).
 * Client and server share one process (as in bench/run.ts): the client's work is in the numbers.
 * The goal (issue): a batch of 100 costs at most 3x one single evaluation (p50), and a single
 * evaluation is within 1.5x of introspection (p50). The sequential
 * p50s decide the verdict (they have sub-millisecond resolution); the ratios under load are
 * printed beside them. This is a benchmark, not a test: once every answer has been checked it
 * reports and exits 0, whatever the numbers.
 */
import { Agent, request } from 'node:http';
import os from 'node:os';
import autocannon from 'autocannon';
import { AUTHZEN_DATA, DECISION_TABLE, evaluationOf, SHARING_REGO } from '../test/authzen/sharing.js';
import { confidentialClient, policyInForce } from '../test/support/oauth.js';
import { startTestServer, type TestServer } from '../test/support/server.js';
import { clientToken } from '../test/uma/support.js';
import { elapsedMs, percentile, writeResults } from './stats.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const SEQUENTIAL_REQUESTS = Number(process.env.BENCH_SEQUENTIAL_REQUESTS ?? 200);
const WARMUP = 20;
const BATCH_SIZE = 100;
const GOALS = { batchOverSingle: 3, singleOverIntrospect: 1.5 };
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const JSON_TYPE = { 'content-type': 'application/json' };

interface Scenario {
  key: 'introspect' | 'single' | 'batch100' | 'search';
  name: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** Throws unless the answer is the expected one. */
  check(status: number, body: any): void;
}

interface LoadResult {
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  requests: number;
  errors: number;
}

interface SequentialResult {
  requests: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
  errors: number;
  rps: number;
}

/** One keep-alive connection, as little client work as possible: the body is read, the time is taken, parsing comes after. */
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

function post(server: TestServer, scenario: Scenario): Promise<{ ms: number; status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(scenario.path, server.url);
    const start = process.hrtime.bigint();
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent,
        headers: { ...scenario.headers, 'content-length': Buffer.byteLength(scenario.body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ ms: elapsedMs(start), status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(scenario.body);
  });
}

async function checked(server: TestServer, scenario: Scenario): Promise<void> {
  const { status, text } = await post(server, scenario);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  try {
    scenario.check(status, body);
  } catch (error) {
    throw new Error(`${scenario.name}: ${(error as Error).message}; answer ${status} ${text.slice(0, 400)}`, {
      cause: error,
    });
  }
}

function must(condition: boolean, what: string): void {
  if (!condition) throw new Error(`unexpected answer (${what})`);
}

/**
 * The scenarios in turn, one request each per round, so that they share whatever else the machine
 * is doing at the time (the ratios are what matters): `WARMUP` untimed rounds, then the timed ones.
 */
async function sequential(server: TestServer, scenarios: Scenario[]): Promise<Map<Scenario['key'], SequentialResult>> {
  for (let i = 0; i < WARMUP; i++) for (const scenario of scenarios) await post(server, scenario);
  const times = new Map(scenarios.map((scenario) => [scenario.key, [] as number[]]));
  const errors = new Map(scenarios.map((scenario) => [scenario.key, 0]));
  for (let i = 0; i < SEQUENTIAL_REQUESTS; i++) {
    for (const scenario of scenarios) {
      const { ms, status } = await post(server, scenario);
      times.get(scenario.key)!.push(ms);
      if (status !== 200) errors.set(scenario.key, errors.get(scenario.key)! + 1);
    }
  }
  const results = new Map<Scenario['key'], SequentialResult>();
  for (const scenario of scenarios) {
    const mine = times.get(scenario.key)!;
    const sorted = [...mine].sort((a, b) => a - b);
    const total = mine.reduce((sum, ms) => sum + ms, 0);
    results.set(scenario.key, {
      requests: mine.length,
      p50: percentile(sorted, 50),
      p95: percentile(sorted, 95),
      p99: percentile(sorted, 99),
      max: percentile(sorted, 100),
      mean: total / mine.length,
      errors: errors.get(scenario.key)!,
      rps: mine.length / (total / 1000),
    });
  }
  return results;
}

async function underLoad(server: TestServer, scenario: Scenario): Promise<LoadResult> {
  const result = await autocannon({
    url: `${server.url}${scenario.path}`,
    method: 'POST',
    headers: scenario.headers,
    body: scenario.body,
    connections: CONNECTIONS,
    duration: SECONDS,
  });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p90: result.latency.p90,
    p99: result.latency.p99,
    max: result.latency.max,
    requests: result.requests.total,
    errors: result.errors + result.timeouts + result.non2xx,
  };
}

async function main(): Promise<void> {
  if (!(SECONDS > 0 && CONNECTIONS >= 1 && SEQUENTIAL_REQUESTS >= 1))
    throw new Error('need BENCH_SECONDS > 0, BENCH_CONNECTIONS >= 1 and BENCH_SEQUENTIAL_REQUESTS >= 1');
  const startedAt = new Date();
  const runStart = process.hrtime.bigint();
  const server = await startTestServer();
  try {
    await server.waitUntilReady();

    // The sharing policy and its data, in force before anything is measured.
    const data = await server.admin('PUT', '/policy-data/by-key?dataKey=authzen', {
      dataKey: 'authzen',
      payload: JSON.stringify(AUTHZEN_DATA),
    });
    if (data.status !== 200 && data.status !== 201)
      throw new Error(`policy data not saved: ${data.status} ${JSON.stringify(data.body)}`);
    const path = 'arbiter/access_evaluation/access_evaluation.rego';
    const rule = await server.admin('PUT', `/policy-rules/by-path?path=${encodeURIComponent(path)}`, {
      version: null,
      kind: 'rego',
      path,
      content: SHARING_REGO,
    });
    if (rule.status !== 200) throw new Error(`policy rule not saved: ${rule.status} ${JSON.stringify(rule.body)}`);
    await policyInForce(server);

    // The PEP (Bearer, scope authzen), an introspection caller, and the token it introspects (the PEP's).
    const pepSecret = await confidentialClient(server, 'pep', { scopes: ['authzen'] });
    const pepToken = await clientToken(server, 'pep', pepSecret, { resource: 'urn:as:authzen', scope: 'authzen' });
    const rsSecret = await confidentialClient(server, 'bench-rs', { scopes: ['introspection'] });
    const rsToken = await clientToken(server, 'bench-rs', rsSecret, { scope: 'introspection' });
    const pep = { ...JSON_TYPE, authorization: `Bearer ${pepToken}` };

    const batchRows = Array.from({ length: BATCH_SIZE }, (_, i) => DECISION_TABLE[i % DECISION_TABLE.length]!);
    const scenarios: Scenario[] = [
      {
        key: 'introspect',
        name: 'POST /introspect (Bearer caller)',
        path: '/introspect',
        headers: { ...FORM, authorization: `Bearer ${rsToken}` },
        body: new URLSearchParams({ token: pepToken }).toString(),
        check(status, body) {
          must(status === 200, 'status 200');
          must(body?.active === true && body?.client_id === 'pep', 'active, client_id pep');
        },
      },
      {
        key: 'single',
        name: 'POST /access/v1/evaluation (bob edit plan)',
        path: '/access/v1/evaluation',
        headers: pep,
        body: JSON.stringify(evaluationOf('bob', 'edit', 'plan')),
        check(status, body) {
          must(status === 200, 'status 200');
          must(
            JSON.stringify(body) === JSON.stringify({ decision: true, context: { obligations: { role: 'editor' } } }),
            'permit with role editor',
          );
        },
      },
      {
        key: 'batch100',
        name: `POST /access/v1/evaluations (${BATCH_SIZE} items)`,
        path: '/access/v1/evaluations',
        headers: pep,
        body: JSON.stringify({
          evaluations: batchRows.map(([subject, action, document]) => evaluationOf(subject, action, document)),
        }),
        check(status, body) {
          must(status === 200, 'status 200');
          const answers = body?.evaluations;
          must(Array.isArray(answers) && answers.length === BATCH_SIZE, `${BATCH_SIZE} decisions`);
          batchRows.forEach(([subject, action, document, allowed, role], i) => {
            const answer = answers[i];
            must(answer?.decision === allowed, `item ${i}: ${subject} ${action} ${document} -> ${allowed}`);
            if (allowed) must(answer.context?.obligations?.role === role, `item ${i}: role ${role}`);
            else must(answer.context?.error === 'access_denied', `item ${i}: access_denied`);
          });
        },
      },
      {
        key: 'search',
        name: 'POST /access/v1/search/subject (edit plan)',
        path: '/access/v1/search/subject',
        headers: pep,
        body: JSON.stringify({
          subject: { type: 'user' },
          action: { name: 'edit' },
          resource: { type: 'document', id: 'plan' },
        }),
        check(status, body) {
          must(status === 200, 'status 200');
          const ids = (body?.results ?? []).map((result: { id: string }) => result.id).sort();
          must(JSON.stringify(ids) === JSON.stringify(['alice', 'bob', 'carol']), 'alice, bob, carol');
        },
      },
    ];

    // Every answer checked once; the batch's also decides the search's candidates (none truncated).
    for (const scenario of scenarios) await checked(server, scenario);

    const sequentialResults = await sequential(server, scenarios);
    agent.destroy();
    const loadResults = new Map<Scenario['key'], LoadResult>();
    for (const scenario of scenarios) loadResults.set(scenario.key, await underLoad(server, scenario));
    // The answers are still the expected ones after the load.
    for (const scenario of scenarios) await checked(server, scenario);

    const seq = (key: Scenario['key']) => sequentialResults.get(key)!;
    const load = (key: Scenario['key']) => loadResults.get(key)!;
    const ratios = {
      sequential: {
        batchOverSingle: seq('batch100').p50 / seq('single').p50,
        singleOverIntrospect: seq('single').p50 / seq('introspect').p50,
      },
      underLoad: {
        batchOverSingle: load('batch100').p50 / load('single').p50,
        singleOverIntrospect: load('single').p50 / load('introspect').p50,
      },
    };
    const verdict = {
      batchOverSingle: ratios.sequential.batchOverSingle <= GOALS.batchOverSingle,
      singleOverIntrospect: ratios.sequential.singleOverIntrospect <= GOALS.singleOverIntrospect,
    };
    // The ratio column: p50 over the p50 of the scenario each goal compares with (introspection for the single, the single for the others).
    const reference = (key: Scenario['key']): Scenario['key'] =>
      key === 'single' ? 'introspect' : key === 'introspect' ? 'introspect' : 'single';
    const referenceName = (key: Scenario['key']) => (key === 'introspect' ? '' : `/${reference(key)}`);

    const cpus = os.cpus();
    console.log(
      `\nAuthZEN vs introspection, same run; ${cpus.length} CPUs (${cpus[0]?.model ?? 'unknown'}), Node ${process.version}, SQLite store, managed OPA`,
    );
    console.log(
      `sequential: 1 connection, scenarios interleaved, ${SEQUENTIAL_REQUESTS} timed requests each after ${WARMUP} warm-up; under load: autocannon, ${CONNECTIONS} connections, ${SECONDS} s (whole ms)\n`,
    );
    const header = [
      'scenario'.padEnd(46),
      'mode'.padEnd(10),
      'req/s'.padStart(7),
      'p50 ms'.padStart(8),
      'p95 ms'.padStart(8),
      'p99 ms'.padStart(8),
      'errors'.padStart(7),
      'ratio p50'.padStart(18),
    ].join(' ');
    console.log(header);
    console.log('-'.repeat(header.length));
    for (const scenario of scenarios) {
      const s = seq(scenario.key);
      const l = load(scenario.key);
      const ratioOf = (mine: number, theirs: number) =>
        scenario.key === 'introspect' ? '1.00' : `${(mine / theirs).toFixed(2)} (${referenceName(scenario.key)})`;
      console.log(
        [
          scenario.name.padEnd(46),
          'sequential',
          s.rps.toFixed(0).padStart(7),
          s.p50.toFixed(2).padStart(8),
          s.p95.toFixed(2).padStart(8),
          s.p99.toFixed(2).padStart(8),
          String(s.errors).padStart(7),
          ratioOf(s.p50, seq(reference(scenario.key)).p50).padStart(18),
        ].join(' '),
      );
      console.log(
        [
          ''.padEnd(46),
          `load x${CONNECTIONS}`.padEnd(10),
          l.rps.toFixed(0).padStart(7),
          String(l.p50).padStart(8),
          `(p90 ${l.p90})`.padStart(8),
          String(l.p99).padStart(8),
          String(l.errors).padStart(7),
          ratioOf(l.p50, load(reference(scenario.key)).p50).padStart(18),
        ].join(' '),
      );
    }
    const mark = (met: boolean) => (met ? 'met' : 'MISSED');
    console.log('\ngoals (sequential p50 decides; under load for comparison):');
    console.log(
      `  batch of ${BATCH_SIZE} p50 / single p50     <= ${GOALS.batchOverSingle}  : ${ratios.sequential.batchOverSingle.toFixed(2)} ${mark(verdict.batchOverSingle)}   (under load ${ratios.underLoad.batchOverSingle.toFixed(2)})`,
    );
    console.log(
      `  single p50 / introspect p50      <= ${GOALS.singleOverIntrospect}: ${ratios.sequential.singleOverIntrospect.toFixed(2)} ${mark(verdict.singleOverIntrospect)}   (under load ${ratios.underLoad.singleOverIntrospect.toFixed(2)})`,
    );

    const totalSeconds = elapsedMs(runStart) / 1000;
    const file = writeResults('authzen', startedAt, {
      totalSeconds,
      parameters: {
        seconds: SECONDS,
        connections: CONNECTIONS,
        sequentialRequests: SEQUENTIAL_REQUESTS,
        warmup: WARMUP,
        batchSize: BATCH_SIZE,
        store: 'sqlite',
        policy: 'managed OPA',
        caller: 'Bearer',
      },
      goals: {
        batchOverSingleP50: {
          max: GOALS.batchOverSingle,
          sequential: ratios.sequential.batchOverSingle,
          underLoad: ratios.underLoad.batchOverSingle,
          met: verdict.batchOverSingle,
        },
        singleOverIntrospectP50: {
          max: GOALS.singleOverIntrospect,
          sequential: ratios.sequential.singleOverIntrospect,
          underLoad: ratios.underLoad.singleOverIntrospect,
          met: verdict.singleOverIntrospect,
        },
      },
      results: scenarios.map((scenario) => ({
        scenario: scenario.name,
        key: scenario.key,
        path: scenario.path,
        bodyBytes: Buffer.byteLength(scenario.body),
        sequential: seq(scenario.key),
        underLoad: load(scenario.key),
      })),
    });
    console.log(`\nresults: ${file} (total ${totalSeconds.toFixed(1)} s)`);
  } finally {
    agent.destroy();
    await server.close();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
