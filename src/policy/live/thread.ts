/**
 * A decision thread (pool.ts starts it): the live engine's decisions that are not proven cheap
 * are evaluated here, off the event loop, so that the pool can end one that runs past the
 * decision budget. It keeps the newest revisions it was given (the compiled Rego module with its
 * data, and the snapshot Cedar reads), and answers each input of a job as soon as it is decided,
 * so that an input that overruns the budget is told apart from the ones decided before it.
 */
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import { loadPolicy } from '@open-policy-agent/opa-wasm';
import { CedarDriver } from '../cedar/driver.js';
import { CompiledRego, outOfWasmMemory, wasmMemoryOf } from '../opa/compiled.js';
import { evaluateBoth, type ThreadJob, type ThreadReply, type RevisionPayload } from './protocol.js';

interface LoadedRevision {
  rego: CompiledRego | null;
  payload: RevisionPayload;
  /** Why the last evaluation of the compiled module stopped (the caller then asks OPA). */
  stopped: string | null;
}

const port = parentPort!;
/** POLICY_DECISION_MEMORY_MB (null: unbounded, as a test's thread may be): the most Wasm memory a module may grow to. */
const memoryMb = (workerData as { memoryMb?: number | null } | null)?.memoryMb ?? null;
const cedar = new CedarDriver();
const revisions = new Map<string, LoadedRevision>();

port.on('message', (job: ThreadJob) => {
  void run(job).catch((error: unknown) =>
    port.postMessage({ id: job.id, error: (error as Error)?.message ?? String(error) } satisfies ThreadReply),
  );
});
port.postMessage({ ready: true } satisfies ThreadReply);

async function run(job: ThreadJob): Promise<void> {
  if (job.load) await load(job.load);
  const revision = revisions.get(job.revision);
  if (!revision) throw new Error(`the decision thread does not hold revision ${job.revision}`);
  for (const [index, input] of job.inputs.entries()) {
    revision.stopped = null;
    const started = performance.now();
    const { rego, cedar: cedarVerdict } = evaluateBoth(
      revision.rego,
      cedar,
      revision.payload.snapshot,
      job.point,
      input,
    );
    const ms = performance.now() - started;
    // Out of memory is this input's fault, not the module's: it fails closed, and is not handed to
    // OPA, where the same evaluation would grow without bound.
    const outOfMemory = outOfWasmMemory(revision.stopped);
    port.postMessage({
      id: job.id,
      index,
      rego: outOfMemory
        ? {
            kind: 'failed',
            reason: `the ${job.point} decision needed more memory than POLICY_DECISION_MEMORY_MB (${memoryMb} MB)`,
          }
        : rego,
      cedar: cedarVerdict,
      ms,
      ...(revision.stopped && !outOfMemory ? { stopped: revision.stopped } : {}),
    } satisfies ThreadReply);
  }
}

/** The revision's module and data, kept with the one before it (decisions of both may be under way). */
async function load(payload: RevisionPayload): Promise<void> {
  const loaded: LoadedRevision = { rego: null, payload, stopped: null };
  if (payload.wasm) {
    const policy = await loadPolicy(payload.wasm, memoryMb ? wasmMemoryOf(memoryMb) : undefined);
    policy.setData(payload.snapshot.mergedData);
    loaded.rego = new CompiledRego(payload.snapshot.revision, policy, new Set(payload.points), (_point, reason) => {
      loaded.stopped = reason;
    });
  }
  revisions.delete(payload.key);
  revisions.set(payload.key, loaded);
  while (revisions.size > KEPT_REVISIONS) revisions.delete(revisions.keys().next().value!);
}

const KEPT_REVISIONS = 2;
