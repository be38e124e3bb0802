import type { Context } from 'koa';
import { methodNotAllowed } from './http/errors.js';
import type { PolicyEngine, PolicyFault } from './policy/index.js';
import type { ClockSkew, Store } from './store/index.js';
import type { WorkersReport } from './workers/protocol.js';

/** The probes: /livez (the process answers), /readyz (it can serve) and /healthz (and the policy's own faults), see health. */
const HEALTH_PATH = '/healthz';
const LIVENESS_PATH = '/livez';
export const PROBE_PATHS = [HEALTH_PATH, '/readyz', LIVENESS_PATH];

/**
 * GET /livez: 200 while the process answers at all, whatever the store or OPA say, so that a
 * liveness probe never restarts a server that only waits for OPA to come back (OPA restarting
 * makes readiness 503 for about a second).
 *
 * GET /readyz: "this node can serve", 200 or 503, within PROBE_TIMEOUT_MS whatever hangs. The
 * store answers and takes a write (a counter of its shared windows: a full disk, a held write
 * lock or a server that is down or frozen fails it, where a read would still pass); the policy
 * can decide (OPA has activated a bundle, or the revision the store holds is evaluated in
 * process); OPA does not serve an older revision than the store's for longer than
 * POLICY_LAG_BOUND_SECONDS (it refused the new bundle, or cannot fetch it: this node would decide
 * on stale policy); every configured worker is up. It says which bundle revision the store holds
 * and which one OPA serves, so that operators (and tests) can wait for a policy change to be in
 * force instead of guessing.
 *
 * GET /healthz: the same, and also the policy's own faults (PolicyEngine.policyFaults): a point
 * the policy in force cannot decide (its own evaluation error) makes it 503 `degraded`, naming
 * the point and the engine's error. Those are not readiness: they follow the traffic a node gets
 * (one client's data can make its own decisions fail), and every node shares the policy, so a
 * load balancer draining nodes for them would take the service down for every client.
 */
export function health(
  store: Store,
  policy: PolicyEngine,
  lagBoundSeconds: number,
  workers?: () => WorkersReport,
  clock?: ClockSkew,
) {
  let behindSince: number | null = null;
  // Probes under way at once share one round of checks: the probes are open to anyone, and each
  // round writes to the store and asks OPA (found 2026-11-30: 50 at once made 50 store writes).
  let checking: Promise<Checks> | null = null;
  const checks = () =>
    (checking ??= dependencyChecks(store, policy).finally(() => {
      checking = null;
    }));
  return async function probe(ctx: Context): Promise<void> {
    // Found 2026-11-30: any method was answered 200, after the store write a readiness check makes.
    // Answered here: the probes' route has no error handler (probes.ts answers everything itself).
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      const refusal = methodNotAllowed(ctx, 'GET, HEAD');
      ctx.status = refusal.status;
      ctx.body = { error: refusal.code, error_description: refusal.message };
      return;
    }
    if (ctx.path === LIVENESS_PATH) {
      ctx.body = { status: 'alive' };
      return;
    }
    const { storeUp, policyReady, revisions, faults } = await checks();
    const failing = ctx.path === HEALTH_PATH ? faults.filter((fault) => fault.failing) : [];
    behindSince = revisions && revisions.opa !== revisions.store ? (behindSince ?? Date.now()) : null;
    const lagSeconds = behindSince === null ? 0 : Math.floor((Date.now() - behindSince) / 1000);
    const lagging = lagSeconds > lagBoundSeconds;
    const report = workers?.();
    const workersMissing = report ? report.configured - report.up.length : 0;
    const clockProblem = clock?.problem ?? null;
    const ready = storeUp && policyReady && !lagging && workersMissing <= 0 && clockProblem === null;
    ctx.status = ready && failing.length === 0 ? 200 : 503;
    ctx.body = {
      status: ctx.status === 200 ? 'ok' : storeUp && policyReady && !clockProblem ? 'degraded' : 'unavailable',
      store: storeUp ? 'up' : 'down',
      ...(clockProblem ? { clock: clockProblem } : {}),
      policy: !policyReady
        ? 'not ready'
        : lagging
          ? `OPA has served an older revision than the store's for ${lagSeconds} s (a refused bundle?)`
          : failing.length
            ? `the policy in force cannot decide ${failing.map((fault) => `${fault.point} (${fault.error})`).join('; ')}`
            : 'ready',
      ...(faults.length ? { policyFaults: faults } : {}),
      ...(revisions ? { policyRevision: revisions } : {}),
      ...(report ? { workers: report } : {}),
    };
  };
}

interface Checks {
  storeUp: boolean;
  policyReady: boolean;
  revisions: Awaited<ReturnType<PolicyEngine['revisions']>> | null;
  faults: PolicyFault[];
}

/** What the store and the policy say, each within PROBE_TIMEOUT_MS. */
async function dependencyChecks(store: Store, policy: PolicyEngine): Promise<Checks> {
  const [storeUp, opaReady, revisions] = await Promise.all([
    withinProbeTime(storeTakesWrites(store), false),
    withinProbeTime(policy.isReady(), false),
    withinProbeTime(policy.revisions(), null),
  ]);
  const policyReady = opaReady || (revisions !== null && revisions.inProcess === revisions.store);
  const faults =
    revisions && policyReady ? await withinProbeTime(policy.policyFaults(revisions), [] as PolicyFault[]) : [];
  return { storeUp, policyReady, revisions, faults };
}

/** Each check of a probe answers within this, so that a probe never hangs on a frozen dependency. */
const PROBE_TIMEOUT_MS = 1000;
/** The counter the readiness probe writes: one short window, purged with the other ended windows. */
const READINESS_WRITE_KEY = 'readiness-probe';

async function storeTakesWrites(store: Store): Promise<boolean> {
  await store.ping();
  await store.addToWindow(READINESS_WRITE_KEY, PROBE_TIMEOUT_MS);
  return true;
}

/** The check's answer, or `otherwise` when it fails or takes longer than PROBE_TIMEOUT_MS. */
function withinProbeTime<T>(check: Promise<T>, otherwise: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => (timer = setTimeout(() => resolve(otherwise), PROBE_TIMEOUT_MS)));
  return Promise.race([check.catch(() => otherwise), late]).finally(() => clearTimeout(timer));
}
