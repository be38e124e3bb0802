import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import type { TestServer } from './server.js';

/**
 * The longest a probe may wait for the event loop while policy code runs off it: such work held
 * the loop for seconds when it ran on it, while a loaded shared machine's scheduling and JIT
 * still cost this process tens of milliseconds now and then.
 */
export const LOOP_HELD_BOUND_MS = 100;

/** One probe of /livez: how long past its pause it was answered, the event loop thread's CPU time meanwhile, and its status (0: dropped). */
export interface LivezProbe {
  ms: number;
  cpuMs: number;
  /** Garbage collection pauses meanwhile: the whole suite's heap, collected on this thread, not the work under test. */
  gcMs: number;
  status: number;
}

/** Garbage collections of this process while probes run. */
const collections: PerformanceEntry[] = [];
const collectionObserver = new PerformanceObserver((list) => collections.push(...list.getEntries()));

function collectionPauseBetween(from: number, to: number): number {
  return collections
    .filter((entry) => entry.startTime >= from && entry.startTime < to)
    .reduce((sum, entry) => sum + entry.duration, 0);
}

/**
 * Probes /livez of `server` every `pauseMs` while `work` runs: its result, how long it took, and
 * each probe. A probe's wait counts from the end of its pause (a loop blocked during the pause
 * delays it too), with the CPU time this thread (the in-process server's event loop, and the
 * test's) used meanwhile: a loop held by an evaluation spends that time on CPU, a process the
 * loaded machine did not schedule does not (see loopDelays).
 */
export async function probingLivez<T>(
  server: TestServer,
  work: Promise<T>,
  pauseMs: number,
): Promise<{ result: T; ms: number; probes: LivezProbe[] }> {
  const started = performance.now();
  let done = false;
  const finished = work.finally(() => (done = true));
  const probes: LivezProbe[] = [];
  collectionObserver.observe({ entryTypes: ['gc'] });
  while (!done) {
    const paused = performance.now();
    const cpu = process.threadCpuUsage();
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    // A probe the server dropped (a connection it timed out while its loop was blocked) is one that waited too.
    const status = await server
      .request('/livez')
      .then(async (answer) => (await answer.arrayBuffer(), answer.status))
      .catch(() => 0);
    const used = process.threadCpuUsage(cpu);
    const now = performance.now();
    probes.push({
      ms: now - paused - pauseMs,
      cpuMs: (used.user + used.system) / 1000,
      gcMs: collectionPauseBetween(paused, now),
      status,
    });
  }
  collectionObserver.disconnect();
  collections.length = 0;
  const result = await finished;
  return { result, ms: performance.now() - started, probes };
}

/**
 * How long each probe waited for the event loop: its latency, unless the loop's thread used less
 * CPU than that meanwhile, when the rest was the machine's (a shared test machine delays any
 * thread by tens of milliseconds): a loop kept busy, as by policy code run on it, uses its CPU.
 * Garbage collection pauses are left out: after minutes of the suite, a major collection of its
 * heap alone takes tens of milliseconds, whatever the server does.
 */
export function loopDelays(probes: LivezProbe[]): number[] {
  return probes.map((probe) => Math.max(0, Math.min(probe.ms, probe.cpuMs) - probe.gcMs));
}
