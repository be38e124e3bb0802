/**
 * RPT latency for a resource owner with many resources and delegations, against a real Arbiter
 * (SQLite store, managed OPA) and the development IdP, all on 127.0.0.1.
 *
 *   npm run bench:uma                          300 timed requests per scenario
 *   BENCH_RPT_REQUESTS=1000 npm run bench:uma
 *   BENCH_RPT_RESOURCES=10 BENCH_RPT_DELEGATIONS=3 npm run bench:uma    a smaller fixture, to compare
 *
 * The fixture: alice registers 1,000 UMA resources (scopes view, print, edit) and delegates
 * `view` on 200 of them to bob (plus 50 delegations of other resources to other users, as
 * noise). viewer-app, a confidential client, redeems permission tickets for bob's claim token
 * (UMA grant, urn:ietf:params:oauth:grant-type:uma-ticket).
 *
 * Only the UMA grant request (POST /token) is timed; the permission ticket it redeems is created
 * just before (POST /permission with alice's PAT), outside the timing. In the concurrent
 * scenario the tickets are created beforehand and 8 workers redeem them. req/s is requests over
 * the time spent in the timed requests (sequential) or over the wall time of the batch (concurrent).
 *
 * The goal (issue): p50 under 50 ms for an RPT request of a user with 1,000 resources and 200
 * delegations. This is a benchmark, not a test: it reports and exits 0 once the fixture is built
 * and every answer is checked, whatever the numbers.
 */
import os from 'node:os';
import { startRegisteredDevIdp, type RegisteredDevIdp } from '../test/support/dev-idp.js';
import { basic, confidentialClient, postForm } from '../test/support/oauth.js';
import { startTestServer } from '../test/support/server.js';
import { ACCESS_TOKEN_FORMAT, api, clientToken, UMA_GRANT, umaPublicClient, userToken } from '../test/uma/support.js';
import { elapsedMs, percentile, writeResults } from './stats.js';

const REQUESTS = Number(process.env.BENCH_RPT_REQUESTS ?? 300);
/** The fixture's size: the figures by default; smaller ones show whether latency grows with it. */
const RESOURCE_COUNT = Number(process.env.BENCH_RPT_RESOURCES ?? 1000);
const DELEGATED_COUNT = Number(process.env.BENCH_RPT_DELEGATIONS ?? 200);
const NOISE_COUNT = Math.min(50, RESOURCE_COUNT - DELEGATED_COUNT);
const SETUP_CONCURRENCY = 16;
const WORKERS = 8;
const WARMUP = 20;
const RESOURCES = '/resource_registration/resource';
const NOISE_SUBJECTS = ['carol', 'dave', 'erin', 'frank', 'grace'];

interface Permission {
  resource_id: string;
  resource_scopes: string[];
}

interface ScenarioResult {
  scenario: string;
  requests: number;
  concurrency: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
  errors: number;
  rps: number;
  /** The first refusal, for the report. */
  firstError?: string;
}

/** Runs `task` over `items` with at most `limit` in flight; answers in the order of `items`. */
async function pool<T, R>(items: T[], limit: number, task: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

async function main(): Promise<void> {
  if (!(REQUESTS >= 1 && DELEGATED_COUNT >= 3 && RESOURCE_COUNT > DELEGATED_COUNT)) {
    throw new Error(
      'need BENCH_RPT_REQUESTS >= 1, BENCH_RPT_DELEGATIONS >= 3 and BENCH_RPT_RESOURCES > BENCH_RPT_DELEGATIONS',
    );
  }
  const startedAt = new Date();
  const runStart = process.hrtime.bigint();
  const server = await startTestServer();
  let idp: RegisteredDevIdp | undefined;
  try {
    await server.waitUntilReady();
    idp = await startRegisteredDevIdp(server);

    // Parties: alice owns (PAT, delegation token), bob asks (claim token), viewer-app redeems.
    const app = await umaPublicClient(server, 'bench-photos-app', 'http://127.0.0.1:1/bench/cb');
    const alicePat = await userToken(server, app, 'alice', {
      resource: 'urn:as:introspect',
      scope: 'openid uma_protection',
    });
    const aliceDelegations = await userToken(server, app, 'alice', {
      resource: 'urn:as:delegation',
      scope: 'openid delegation_management',
    });
    const aliceClaims = await userToken(server, app, 'alice', { scope: 'openid profile' });
    const bobClaims = await userToken(server, app, 'bob', { scope: 'openid profile' });
    const viewerSecret = await confidentialClient(server, 'viewer-app', { scopes: ['openid'] });
    const rsSecret = await confidentialClient(server, 'bench-rs', { scopes: ['introspection'] });
    const rsToken = await clientToken(server, 'bench-rs', rsSecret, { scope: 'introspection' });

    // The fixture: 1,000 resources, 200 delegations to bob, 50 to others.
    let phase = process.hrtime.bigint();
    const resources = await pool(
      Array.from({ length: RESOURCE_COUNT }, (_, i) => i),
      SETUP_CONCURRENCY,
      async (i) => {
        const answer = await api(server, 'POST', RESOURCES, alicePat, {
          name: `Photo ${i}`,
          resource_scopes: ['view', 'print', 'edit'],
        });
        if (answer.status !== 201)
          throw new Error(`resource ${i} not registered: ${answer.status} ${JSON.stringify(answer.body)}`);
        return answer.body._id as string;
      },
    );
    const resourcesMs = elapsedMs(phase);
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const delegated = resources.slice(0, DELEGATED_COUNT);
    const noise = resources.slice(DELEGATED_COUNT, DELEGATED_COUNT + NOISE_COUNT);
    const grants = [
      ...delegated.map((resource_id) => ({
        grantee_type: 'subject',
        grantee_subject_id: 'bob',
        resource_id,
        scopes: ['view'],
        expires_at: expiresAt,
      })),
      ...noise.map((resource_id, i) => ({
        grantee_type: 'subject',
        grantee_subject_id: NOISE_SUBJECTS[i % NOISE_SUBJECTS.length],
        resource_id,
        scopes: ['view', 'print'],
        expires_at: expiresAt,
      })),
    ];
    phase = process.hrtime.bigint();
    await pool(grants, SETUP_CONCURRENCY, async (grant) => {
      const answer = await api(server, 'POST', '/delegation', aliceDelegations, grant);
      if (answer.status !== 201)
        throw new Error(
          `delegation on ${grant.resource_id} not created: ${answer.status} ${JSON.stringify(answer.body)}`,
        );
    });
    const delegationsMs = elapsedMs(phase);
    console.log(
      `fixture: ${RESOURCE_COUNT} resources in ${(resourcesMs / 1000).toFixed(1)} s, ${grants.length} delegations in ${(delegationsMs / 1000).toFixed(1)} s`,
    );

    const ticketFor = async (permissions: Permission | Permission[]): Promise<string> => {
      const answer = await api(server, 'POST', '/permission', alicePat, permissions);
      if (answer.status !== 201) throw new Error(`no ticket: ${answer.status} ${JSON.stringify(answer.body)}`);
      return answer.body.ticket as string;
    };
    const redeem = (ticket: string, claimToken: string) =>
      postForm(
        server,
        '/token',
        { grant_type: UMA_GRANT, ticket, claim_token: claimToken, claim_token_format: ACCESS_TOKEN_FORMAT },
        { Authorization: basic('viewer-app', viewerSecret) },
      );
    const timedRedeem = async (
      ticket: string,
      claimToken: string,
    ): Promise<{ ms: number; status: number; body: any }> => {
      const start = process.hrtime.bigint();
      const answer = await redeem(ticket, claimToken);
      return { ms: elapsedMs(start), status: answer.status, body: answer.body };
    };

    // Sanity: the fixture means what it should (bob holds `view` by delegation, nothing more, and no other resource).
    const checked = await redeem(
      await ticketFor({ resource_id: delegated[0]!, resource_scopes: ['view', 'print'] }),
      bobClaims,
    );
    if (checked.status !== 200)
      throw new Error(`bob's RPT was refused: ${checked.status} ${JSON.stringify(checked.body)}`);
    const shown = await postForm(
      server,
      '/introspect',
      { token: checked.body.access_token },
      { Authorization: `Bearer ${rsToken}` },
    );
    const shownPermissions = (shown.body?.permissions ?? []).map((p: Permission) => [p.resource_id, p.resource_scopes]);
    if (shown.body?.sub !== 'bob' || JSON.stringify(shownPermissions) !== JSON.stringify([[delegated[0], ['view']]])) {
      throw new Error(`unexpected RPT: ${JSON.stringify(shown.body)}`);
    }
    const refused = await redeem(
      await ticketFor({ resource_id: resources[RESOURCE_COUNT - 1]!, resource_scopes: ['view'] }),
      bobClaims,
    );
    if (refused.status !== 403 || refused.body?.error !== 'request_denied')
      throw new Error(`bob was not refused an undelegated resource: ${refused.status} ${JSON.stringify(refused.body)}`);

    // Warm-up, not counted.
    for (let i = 0; i < WARMUP; i++)
      await redeem(
        await ticketFor({ resource_id: delegated[i % DELEGATED_COUNT]!, resource_scopes: ['view'] }),
        bobClaims,
      );

    const summarize = (
      scenario: string,
      concurrency: number,
      answers: { ms: number; status: number; body: any }[],
      timeMs: number,
    ): ScenarioResult => {
      const sorted = answers.map((answer) => answer.ms).sort((a, b) => a - b);
      const failed = answers.filter((answer) => answer.status !== 200 || typeof answer.body?.access_token !== 'string');
      return {
        scenario,
        requests: answers.length,
        concurrency,
        p50: percentile(sorted, 50),
        p95: percentile(sorted, 95),
        p99: percentile(sorted, 99),
        max: percentile(sorted, 100),
        mean: sorted.reduce((sum, ms) => sum + ms, 0) / sorted.length,
        errors: failed.length,
        rps: answers.length / (timeMs / 1000),
        ...(failed.length ? { firstError: `${failed[0]!.status} ${JSON.stringify(failed[0]!.body)}` } : {}),
      };
    };
    /** N times: a fresh ticket (untimed), then the timed grant request. */
    const sequential = async (
      scenario: string,
      permissionsOf: (i: number) => Permission | Permission[],
      claimToken: string,
    ): Promise<ScenarioResult> => {
      const answers = [];
      for (let i = 0; i < REQUESTS; i++) answers.push(await timedRedeem(await ticketFor(permissionsOf(i)), claimToken));
      return summarize(
        scenario,
        1,
        answers,
        answers.reduce((sum, answer) => sum + answer.ms, 0),
      );
    };

    const results: ScenarioResult[] = [];
    const oneDelegated = (i: number): Permission => ({
      resource_id: delegated[i % DELEGATED_COUNT]!,
      resource_scopes: ['view'],
    });
    results.push(await sequential('delegated to bob, 1 permission', oneDelegated, bobClaims));

    const tickets = await pool(
      Array.from({ length: REQUESTS }, (_, i) => i),
      SETUP_CONCURRENCY,
      (i) => ticketFor(oneDelegated(i)),
    );
    const batchStart = process.hrtime.bigint();
    const concurrent = await pool(tickets, WORKERS, (ticket) => timedRedeem(ticket, bobClaims));
    results.push(
      summarize(`delegated to bob, 1 permission, ${WORKERS} workers`, WORKERS, concurrent, elapsedMs(batchStart)),
    );

    results.push(
      await sequential(
        'owner alice, 1 permission',
        (i) => ({ resource_id: resources[(i * 7) % RESOURCE_COUNT]!, resource_scopes: ['view', 'print', 'edit'] }),
        aliceClaims,
      ),
    );
    results.push(
      await sequential(
        'delegated to bob, 3 permissions',
        (i) =>
          [0, 1, 2].map((k) => ({ resource_id: delegated[(i * 3 + k) % DELEGATED_COUNT]!, resource_scopes: ['view'] })),
        bobClaims,
      ),
    );

    const header = [
      'scenario'.padEnd(46),
      'requests'.padStart(8),
      'p50 ms'.padStart(8),
      'p95 ms'.padStart(8),
      'p99 ms'.padStart(8),
      'max ms'.padStart(8),
      'errors'.padStart(7),
      'req/s'.padStart(7),
    ].join(' ');
    console.log(
      `\nUMA grant (RPT) for alice's ${RESOURCE_COUNT} resources, ${DELEGATED_COUNT} delegated to bob (+${NOISE_COUNT} to others); ${os.cpus().length} CPUs, Node ${process.version}\n`,
    );
    console.log(header);
    for (const r of results) {
      console.log(
        [
          r.scenario.padEnd(46),
          String(r.requests).padStart(8),
          r.p50.toFixed(1).padStart(8),
          r.p95.toFixed(1).padStart(8),
          r.p99.toFixed(1).padStart(8),
          r.max.toFixed(1).padStart(8),
          String(r.errors).padStart(7),
          r.rps.toFixed(0).padStart(7),
        ].join(' '),
      );
    }
    for (const r of results.filter((result) => result.firstError))
      console.log(`first error of "${r.scenario}": ${r.firstError}`);
    const goal = results[0]!.p50 < 50;
    console.log(
      `\ngoal (p50 < 50 ms, sequential, delegated): ${goal ? 'met' : 'NOT met'} (${results[0]!.p50.toFixed(1)} ms)`,
    );

    const totalSeconds = elapsedMs(runStart) / 1000;
    const file = writeResults('uma-rpt', startedAt, {
      totalSeconds,
      fixture: {
        resources: RESOURCE_COUNT,
        delegationsToParty: DELEGATED_COUNT,
        otherDelegations: NOISE_COUNT,
        resourcesSetupMs: resourcesMs,
        delegationsSetupMs: delegationsMs,
      },
      parameters: { requests: REQUESTS, workers: WORKERS, warmup: WARMUP, store: 'sqlite', policy: 'managed OPA' },
      goal: { p50BelowMs: 50, met: goal },
      results,
    });
    console.log(`results: ${file} (total ${totalSeconds.toFixed(1)} s)`);
  } finally {
    await idp?.close();
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
