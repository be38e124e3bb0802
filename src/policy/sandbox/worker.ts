/**
 * A policy sandbox thread (pool.ts starts it, jobs.ts is what it does). It says when it is
 * loaded, then answers each job in turn. After a job whose memory stays above the limit (Wasm
 * memory, Cedar's or an OPA module's, never shrinks) it asks to be replaced.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { OutOfMemory, SandboxJobs, type SandboxJob } from './jobs.js';

const { memoryMb } = workerData as { memoryMb: number };
const jobs = new SandboxJobs(memoryMb);
const port = parentPort!;

port.on('message', ({ id, job }: { id: number; job: SandboxJob }) => {
  void jobs.run(job).then(
    (result) => port.postMessage({ id, result, recycle: overLimit() }),
    (error: unknown) =>
      port.postMessage({
        id,
        error: (error as Error)?.message ?? String(error),
        // A trap (a stack overflow in Cedar, an abort of OPA's module) may leave Wasm state broken: start afresh.
        recycle: true,
        ...(error instanceof OutOfMemory || (error instanceof RangeError && /memory/i.test(error.message))
          ? { limit: 'memory' }
          : {}),
      }),
  );
});
port.postMessage({ ready: true });

function overLimit(): boolean {
  const { heapUsed, external } = process.memoryUsage();
  return heapUsed + external > memoryMb * 1024 * 1024;
}
