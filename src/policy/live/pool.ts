/**
 * The decision threads of one process. A job (one point, one or more inputs of one revision)
 * runs on an idle thread and must be done by its deadline; the thread answers input by input.
 * Past the deadline, waiting or running, the job ends: a running thread is terminated (a
 * synchronous Wasm loop cannot be interrupted any other way) and a fresh one started in its
 * place. One thread is kept started ahead of need, so that the first decisions do not wait for
 * one; the others (up to `size`) are started when a job finds every thread busy, and let go once
 * idle for `idleMs`: decisions proven cheap run on the event loop, so a thread is mostly idle,
 * and each costs about 35 MB of resident memory (its isolate, the revision's data and Wasm).
 */
import { Worker } from 'node:worker_threads';
import type { DecisionInput, DecisionPoint } from '../contract/types.js';
import type { ItemReply, RevisionPayload, ThreadJob, ThreadReply } from './protocol.js';

/** How a job ended: the inputs decided (in order, up to where it stopped) and, if it stopped, why. */
export interface JobOutcome {
  items: ItemReply[];
  /** Absent when every input was decided. */
  failure?: {
    reason: string;
    /** The deadline passed (while waiting for a thread, or on the input at `items.length`). */
    overBudget: boolean;
    /** True when that input was being evaluated as the deadline passed (it is the costly one). */
    running: boolean;
  };
}

/** What starts one thread (a file URL and the options it needs, e.g. tsx's loader under the sources). */
export interface ThreadEntry {
  module: URL;
  execArgv: string[];
  /** The thread's memory (POLICY_DECISION_MEMORY_MB): its heap, and what its Wasm may grow to (thread.ts). */
  memoryMb?: number;
}

interface Job {
  revision: string;
  payload: () => RevisionPayload;
  point: DecisionPoint;
  inputs: DecisionInput[];
  deadlineAt: number;
  items: ItemReply[];
  done: (outcome: JobOutcome) => void;
  timer?: NodeJS.Timeout;
  /** Once running: its thread, and the id its answers bear. */
  slot?: Slot;
  id?: number;
}

/** Revisions each thread keeps (as thread.ts does): the newest two. */
const KEPT_REVISIONS = 2;

/** After a thread failed to start, the next one is started after this long. */
const RESTART_DELAY_MS = 1_000;

/** Threads kept started while idle: the first decision of a key not yet measured does not wait for one to start. */
const KEPT_THREADS = 1;

/** A thread beyond the kept one is let go after this long without a job. */
const IDLE_MS = 10_000;

/**
 * A decision thread's young generation (MB; V8's default for a thread is sized for a whole
 * process): a thread allocates little besides the inputs and verdicts, and a smaller young
 * generation only means more, shorter scavenges; its old generation is not limited.
 */
const THREAD_YOUNG_GENERATION_MB = 4;

class Slot {
  ready = false;
  job: Job | null = null;
  /** While idle beyond the kept threads: the timer that lets it go. */
  idleTimer: NodeJS.Timeout | null = null;
  /** The revisions sent to this thread, oldest first. */
  readonly loaded: string[] = [];

  constructor(readonly worker: Worker) {}

  holds(revision: string): boolean {
    return this.loaded.includes(revision);
  }

  sent(revision: string): void {
    this.loaded.push(revision);
    if (this.loaded.length > KEPT_REVISIONS) this.loaded.shift();
  }
}

export class DecisionThreads {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  private restartTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly entry: ThreadEntry,
    private readonly size: number,
    private readonly onThreadError: (error: Error) => void = () => {},
    /** How long a thread beyond the kept one stays without a job (a test's shorter time). */
    private readonly idleMs = IDLE_MS,
  ) {}

  /** Starts the kept thread now, if it is missing. */
  warm(): void {
    while (!this.closed && this.slots.length < Math.min(KEPT_THREADS, this.size)) this.start();
  }

  /** True once a thread has been ready to take jobs (a replacement starting meanwhile does not change that). */
  started = false;

  /** Threads started (ready or starting), for tests. */
  get threads(): number {
    return this.slots.length;
  }

  /**
   * Decides `inputs` on a thread by `deadlineAt` (ms since the epoch). `payload` is asked for
   * only when the thread lacks the revision. Never rejects.
   */
  run(
    revision: string,
    payload: () => RevisionPayload,
    point: DecisionPoint,
    inputs: DecisionInput[],
    deadlineAt: number,
  ): Promise<JobOutcome> {
    return new Promise((resolve) => {
      const job: Job = { revision, payload, point, inputs, deadlineAt, items: [], done: resolve };
      if (this.closed) return this.fail(job, 'the decision threads are closed', false);
      job.timer = setTimeout(() => this.overran(job), Math.max(0, deadlineAt - Date.now()));
      this.queue.push(job);
      this.warm();
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    for (const job of this.queue.splice(0)) this.fail(job, 'the decision threads are closed', false);
    await Promise.all(this.slots.splice(0).map((slot) => slot.worker.terminate()));
  }

  private start(): void {
    const worker = new Worker(this.entry.module, {
      execArgv: this.entry.execArgv,
      resourceLimits: {
        maxYoungGenerationSizeMb: THREAD_YOUNG_GENERATION_MB,
        ...(this.entry.memoryMb ? { maxOldGenerationSizeMb: this.entry.memoryMb } : {}),
      },
      workerData: { memoryMb: this.entry.memoryMb ?? null },
    });
    const slot = new Slot(worker);
    worker.on('message', (reply: ThreadReply) => this.replied(slot, reply));
    worker.on('error', (error) => this.gone(slot, error));
    worker.on('exit', () => this.gone(slot, null));
    // An idle thread does not keep the process alive.
    worker.unref();
    this.slots.push(slot);
  }

  /** Gives waiting jobs, oldest first, to idle ready threads; starts one more when every thread is busy. */
  private dispatch(): void {
    while (this.queue.length) {
      const slot = this.slots.find((candidate) => candidate.ready && !candidate.job);
      if (!slot) {
        const starting = this.slots.some((candidate) => !candidate.ready);
        if (!starting && !this.closed && this.slots.length < this.size) this.start();
        return;
      }
      const job = this.queue.shift()!;
      job.id = this.nextId++;
      job.slot = slot;
      slot.job = job;
      if (slot.idleTimer) clearTimeout(slot.idleTimer);
      slot.idleTimer = null;
      const message: ThreadJob = { id: job.id, revision: job.revision, point: job.point, inputs: job.inputs };
      if (!slot.holds(job.revision)) {
        message.load = job.payload();
        slot.sent(job.revision);
      }
      slot.worker.postMessage(message);
    }
  }

  private replied(slot: Slot, reply: ThreadReply): void {
    if ('ready' in reply) {
      slot.ready = true;
      this.started = true;
      this.dispatch();
      return;
    }
    const job = slot.job;
    if (!job || reply.id !== job.id) return;
    if ('error' in reply) {
      this.release(slot);
      this.fail(job, `the decision thread failed: ${reply.error}`, false);
      return;
    }
    job.items.push(reply);
    if (job.items.length < job.inputs.length) return;
    this.release(slot);
    clearTimeout(job.timer);
    job.done({ items: job.items });
  }

  /** The deadline passed: a waiting job leaves the queue, a running one ends with its thread. */
  private overran(job: Job): void {
    const waiting = this.queue.indexOf(job);
    if (waiting >= 0) {
      this.queue.splice(waiting, 1);
      return this.fail(job, 'no decision thread was free in time', true);
    }
    const slot = job.slot;
    if (!slot || slot.job !== job) return;
    slot.job = null;
    this.remove(slot);
    void slot.worker.terminate();
    job.done({
      items: job.items,
      failure: { reason: 'its evaluation ran out of time', overBudget: true, running: true },
    });
    this.warm();
    this.dispatch();
  }

  /** A thread exited or crashed: its job fails, and it is replaced (after a pause if it never started). */
  private gone(slot: Slot, error: Error | null): void {
    if (!this.remove(slot)) return;
    if (error) this.onThreadError(error);
    const job = slot.job;
    slot.job = null;
    if (job) this.fail(job, `the decision thread stopped: ${error?.message ?? 'it exited'}`, false);
    if (this.closed) return;
    if (slot.ready) {
      this.warm();
      this.dispatch();
    } else {
      this.restartTimer ??= setTimeout(() => {
        this.restartTimer = null;
        this.warm();
        this.dispatch();
      }, RESTART_DELAY_MS);
      this.restartTimer.unref();
    }
  }

  private remove(slot: Slot): boolean {
    const at = this.slots.indexOf(slot);
    if (at < 0) return false;
    if (slot.idleTimer) clearTimeout(slot.idleTimer);
    this.slots.splice(at, 1);
    return true;
  }

  private release(slot: Slot): void {
    slot.job = null;
    this.dispatch();
    if (!slot.job && this.slots.length > KEPT_THREADS) {
      slot.idleTimer = setTimeout(() => this.letGo(slot), this.idleMs);
      slot.idleTimer.unref();
    }
  }

  /** An idle thread beyond the kept ones ends (its memory returns); the next busy moment starts one again. */
  private letGo(slot: Slot): void {
    slot.idleTimer = null;
    if (slot.job || this.slots.length <= KEPT_THREADS || !this.remove(slot)) return;
    void slot.worker.terminate();
  }

  private fail(job: Job, reason: string, overBudget: boolean): void {
    clearTimeout(job.timer);
    job.done({ items: job.items, failure: { reason, overBudget, running: false } });
  }
}
