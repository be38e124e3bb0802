import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { basic, confidentialClient, eventually, FORM } from '../support/oauth.js';
import {
  connectionsToWorkers,
  startProcessServer,
  type ProcessServer,
  type WorkerConnection,
} from '../support/server-process.js';
import { ADMIN_KEY } from '../support/server.js';

const TOKEN_RULE = 'arbiter/token/token.rego';
const PACK_TOKEN_RULE = readFileSync(new URL('../../policies/arbiter/token/token.rego', import.meta.url), 'utf8');
/** The pack's token rule, with the scope "write" never granted to a client_credentials token. */
const WITHOUT_WRITE = PACK_TOKEN_RULE.replace(
  'machine_scopes := lib.scopes_granted(requested, allowed, allowed) - lib.user_only_scopes',
  'machine_scopes := (lib.scopes_granted(requested, allowed, allowed) - lib.user_only_scopes) - {"write"}',
);

/**
 * One truth (issue 37, point 1): with WORKERS=2, GET /admin/api/policy-shadow/differences
 * alternated between one worker's memory and the other's, so an operator reviewing a shadow could
 * miss every difference; the overview's activity was per worker and reset on restart. Each
 * process now keeps its share in the store and every worker sums all of them: both workers answer
 * the same, and a restart of the whole server loses nothing. The same holds for the policy's own
 * faults in /healthz: one worker's failing decisions are every worker's report.
 */
describe('One truth across workers and restarts: shadow differences and activity', function () {
  const storeDir = mkdtempSync(join(tmpdir(), 'arbiter-one-truth-'));
  const env = { STORE_URL: `sqlite:${join(storeDir, 'arbiter.db')}`, HTTP_KEEP_ALIVE_TIMEOUT_MS: '120000' };
  let server: ProcessServer;
  let workers: WorkerConnection[];
  const REQUESTS = 8;

  before(async function () {
    this.timeout(120_000);
    server = await startProcessServer(env);
    workers = await connectionsToWorkers(server.url, 2);
  });

  after(async function () {
    for (const worker of workers ?? []) worker.close();
    await server?.close();
    rmSync(storeDir, { recursive: true, force: true });
  });

  const adminVia = async (worker: WorkerConnection, path: string) =>
    (await worker.request(`/admin/api${path}`, { headers: { 'X-Admin-API-Key': ADMIN_KEY } })).body;
  /** What each worker says, as the operator would compare it. */
  const shadowView = async (worker: WorkerConnection) => {
    const body = await adminVia(worker, '/policy-shadow/differences?limit=1000');
    return {
      evaluated: body.evaluated as number,
      narrower: body.summary.byPoint.token?.narrower ?? 0,
      differences: (body.differences as { auditId: number; kind: string }[])
        .map((d) => `${d.auditId} ${d.kind}`)
        .sort(),
    };
  };
  const tokenActivity = async (worker: WorkerConnection) => {
    const body = await adminVia(worker, '/activity?minutes=60');
    return (body.minutes as { byPoint: Record<string, { allow: number }> }[]).reduce(
      (sum, minute) => sum + (minute.byPoint.token?.allow ?? 0),
      0,
    );
  };

  it('answers the same shadow differences and activity from both workers, every decision of both counted', async function () {
    this.timeout(120_000);
    const shadow = await server.admin('POST', '/policy-rules', {
      version: null,
      kind: 'rego',
      path: TOKEN_RULE,
      content: WITHOUT_WRITE,
      mode: 'shadow',
    });
    expect(shadow.status, JSON.stringify(shadow.body)).to.equal(201);
    const secret = await confidentialClient(server, 'one-truth-svc', { scopes: ['read', 'write'] });
    for (let index = 0; index < REQUESTS; index += 1) {
      const answer = await workers[index % 2]!.request('/token', {
        method: 'POST',
        headers: { ...FORM, authorization: basic('one-truth-svc', secret) },
        body: 'grant_type=client_credentials&scope=read%20write',
      });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    }
    // Each worker evaluates its own half off the request path; once all are in, both must say so.
    await eventually(async () => (await shadowView(workers[0]!)).evaluated >= REQUESTS, 60_000);
    await eventually(async () => (await shadowView(workers[1]!)).narrower >= REQUESTS, 60_000);
    const [first, second] = [await shadowView(workers[0]!), await shadowView(workers[1]!)];
    expect(first).to.deep.equal(second);
    expect(first.narrower).to.equal(REQUESTS);
    expect(first.differences).to.have.length(REQUESTS);
    expect(first.differences.every((difference) => difference.endsWith(' narrower'))).to.equal(true);

    await eventually(async () => (await tokenActivity(workers[1]!)) >= REQUESTS, 30_000);
    expect(await tokenActivity(workers[0]!)).to.equal(await tokenActivity(workers[1]!));
  });

  it("reports one worker's failing decisions in every worker's /healthz", async function () {
    this.timeout(120_000);
    // A rule that cannot decide for one client only (a second value for the token decision), which
    // has never been seen, so the write's trial has nothing of it to try: accepted, and in force.
    const written = await server.admin('POST', '/policy-rules', {
      version: null,
      kind: 'rego',
      path: 'arbiter/one-truth.rego',
      content: 'package arbiter.token\n\ndecision := {"allow": false} if input.client.client_id == "one-truth-late"\n',
    });
    expect(written.status, JSON.stringify(written.body)).to.equal(201);
    const secret = await confidentialClient(server, 'one-truth-late', { scopes: ['read'] });
    const failingOn = async (worker: WorkerConnection) =>
      (
        await worker.request('/token', {
          method: 'POST',
          headers: { ...FORM, authorization: basic('one-truth-late', secret) },
          body: 'grant_type=client_credentials&scope=read',
        })
      ).status;
    // Only worker 0 gets the failing traffic (once the rule is in force there, the answer is a 503).
    await eventually(async () => (await failingOn(workers[0]!)) === 503, 30_000);
    expect(await failingOn(workers[0]!)).to.equal(503);
    const tokenFault = async (worker: WorkerConnection) =>
      ((await worker.request('/healthz')).body.policyFaults ?? []).find(
        (fault: { point: string }) => fault.point === 'token',
      );
    await eventually(async () => (await tokenFault(workers[1]!))?.failed >= 2, 30_000);
    const [first, second] = [await tokenFault(workers[0]!), await tokenFault(workers[1]!)];
    expect(second.error).to.contain('eval_conflict_error');
    expect({ ...first, at: null }).to.deep.equal({ ...second, at: null });
    const removed = await server.admin('DELETE', `/policy-rules/${written.body.id}`);
    expect(removed.status).to.equal(204);
  });

  it('keeps them across a restart of the whole server on the same store', async function () {
    this.timeout(120_000);
    const before = await shadowView(workers[0]!);
    const activityBefore = await tokenActivity(workers[0]!);
    for (const worker of workers) worker.close();
    await server.close();
    server = await startProcessServer(env);
    workers = await connectionsToWorkers(server.url, 2);
    for (const worker of workers) {
      expect(await shadowView(worker)).to.deep.equal(before);
      expect(await tokenActivity(worker)).to.equal(activityBefore);
    }
  });
});
