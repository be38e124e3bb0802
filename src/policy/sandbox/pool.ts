/**
 * Worker threads that run jobs off the event loop, each with a time limit and a memory limit,
 * and a cap on how many run at once. A job past its time limit has its thread terminated (a
 * synchronous loop, in JavaScript or Wasm, cannot be interrupted any other way) and the thread is
 * replaced; so is a thread that ran out of heap (resourceLimits) or asked to be (its memory stayed
 * above the limit after a job: Wasm memory never shrinks). Jobs wait, in order, for a free thread
 * at most three time limits and at most `maxQueued` of them; beyond, the pool is busy (503).
 *
 * The protocol (worker.ts speaks it): the thread posts `{ ready: true }` once loaded, then answers
 * each `{ id, job }` with `{ id, result }` or `{ id, error, limit? }`, and `recycle: true` when it
 * should be replaced after this answer.
 */
import { Worker, type WorkerOptions } from 'node:worker_threads';
import type { Unavailable } from '../../http/errors.js';

export interface PoolLimits {
  /** How long one job may run (from when a thread takes it). */
  timeoutMs: number;
  /** The thread's JavaScript heap (old generation). */
  memoryMb: number;
  /** Threads, hence jobs run at once. */
  threads: number;
  /** Jobs waiting for a thread beyond this many are refused (busy). */
  maxQueued: number;
}

/** What a thread runs: its module (a file URL, or JavaScript source with `eval`), and its options. */
export interface PoolEntry {
  module: URL | string;
  eval?: boolean;
  execArgv?: string[];
  workerData?: unknown;
}

/** A job stopped by a limit: `limit` says which, the message names it and its value. */
export class SandboxLimitError extends Error {
  constructor(
    readonly limit: 'time' | 'memory',
    message: string,
  ) {
    super(message);
    this.name = 'SandboxLimitError';
  }
}

/** No thread could take the job in time (or the thread could not start): the caller tries again later. */
export class SandboxBusyError extends Error implements Unavailable {
  readonly status = 503;
  readonly error = 'temporarily_unavailable';
  readonly dependency = 'policy sandbox';
  constructor(
    readonly reason: string,
    /** Seconds after which a retry may find a free thread. */
    readonly retryAfterSeconds: number,
  ) {
    super(reason);
    this.name = 'SandboxBusyError';
  }
}

/** A job the thread itself refused or failed (its own error, not a limit). */
export class SandboxJobError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SandboxJobError';
  }
}

interface Job {
  message: unknown;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  /** While it waits: the timer that gives up waiting. */
  waiting?: NodeJS.Timeout;
}

interface Reply {
  id?: number;
  ready?: true;
  result?: unknown;
  error?: string;
  limit?: 'memory';
  recycle?: boolean;
}

/** A job waits for a thread at most this many time limits. */
const QUEUE_WAIT_LIMITS = 3;

/** How long a new thread may take to load its modules. */
const STARTUP_LIMIT_MS = 60_000;

class Slot {
  readonly worker: Worker;
  ready = false;
  job: (Job & { id: number; timer: NodeJS.Timeout }) | null = null;
  gone = false;

  constructor(
    entry: PoolEntry,
    limits: PoolLimits,
    private readonly onReply: (slot: Slot, reply: Reply) => void,
    private readonly onGone: (slot: Slot, error: Error | null) => void,
  ) {
    const options: WorkerOptions = {
      eval: entry.eval ?? false,
      execArgv: entry.execArgv ?? [],
      workerData: entry.workerData,
      resourceLimits: { maxOldGenerationSizeMb: limits.memoryMb, maxYoungGenerationSizeMb: 16 },
    };
    this.worker = new Worker(entry.module, options);
    this.worker.on('message', (reply: Reply) => this.onReply(this, reply));
    this.worker.on('error', (error) => this.leave(error));
    this.worker.on('exit', () => this.leave(null));
    const startup = setTimeout(() => this.leave(new Error('the thread did not start in time')), STARTUP_LIMIT_MS);
    startup.unref();
    this.worker.once('message', () => clearTimeout(startup));
    this.worker.once('exit', () => clearTimeout(startup));
    // An idle thread does not keep the process alive.
    this.worker.unref();
  }

  private leave(error: Error | null): void {
    if (this.gone) return;
    this.gone = true;
    void this.worker.terminate();
    this.onGone(this, error);
  }

  /** Ends the thread now (a job past its limit, or asked to be replaced). */
  stop(): void {
    this.leave(null);
  }
}

export class WorkerPool {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly entry: PoolEntry,
    readonly limits: PoolLimits,
    /** Names the settings in the messages of limits, e.g. { timeoutMs: 'POLICY_SANDBOX_TIMEOUT_MS' }. */
    private readonly settings: { timeoutMs: string; memoryMb: string } = {
      timeoutMs: 'timeoutMs',
      memoryMb: 'memoryMb',
    },
  ) {}

  /** Runs one job on a free thread; rejects with SandboxLimitError, SandboxBusyError or SandboxJobError. */
  run<T>(message: unknown): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.closed) return reject(new SandboxBusyError('the policy sandbox is closed', 1));
      const job: Job = { message, resolve: resolve as (value: unknown) => void, reject };
      if (this.queue.length >= this.limits.maxQueued)
        return reject(this.busy(`${this.queue.length} jobs already wait for a policy thread`));
      this.queue.push(job);
      job.waiting = setTimeout(() => {
        const at = this.queue.indexOf(job);
        if (at < 0) return;
        this.queue.splice(at, 1);
        reject(this.busy(`no policy thread was free within ${this.maxWaitMs} ms`));
      }, this.maxWaitMs);
      this.dispatch();
    });
  }

  /** How long a job may wait for a thread: the job ahead of it may take a whole time limit, and its thread be replaced. */
  private get maxWaitMs(): number {
    return this.limits.timeoutMs * QUEUE_WAIT_LIMITS;
  }

  /** Threads now (started or starting), for tests and operations. */
  get threads(): number {
    return this.slots.length;
  }

  /** Ends every thread; jobs waiting or running are refused. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) {
      clearTimeout(job.waiting);
      job.reject(new SandboxBusyError('the policy sandbox is closed', 1));
    }
    await Promise.all(this.slots.map((slot) => slot.worker.terminate()));
  }

  private busy(why: string): SandboxBusyError {
    const seconds = Math.max(1, Math.ceil(this.limits.timeoutMs / 1000));
    return new SandboxBusyError(`the policy sandbox is busy: ${why}; try again later`, seconds);
  }

  /** Gives the oldest waiting job to a ready idle thread, starting a thread when there are fewer than allowed. */
  private dispatch(): void {
    while (this.queue.length) {
      const slot = this.slots.find((candidate) => candidate.ready && !candidate.job && !candidate.gone);
      if (!slot) {
        const starting = this.slots.some((candidate) => !candidate.ready && !candidate.gone);
        if (!starting && this.slots.length < this.limits.threads && !this.closed) this.start();
        return;
      }
      const job = this.queue.shift()!;
      clearTimeout(job.waiting);
      const id = this.nextId++;
      const timer = setTimeout(() => this.overtime(slot), this.limits.timeoutMs);
      slot.job = { ...job, id, timer };
      slot.worker.ref();
      slot.worker.postMessage({ id, job: job.message });
    }
  }

  private start(): void {
    this.slots.push(
      new Slot(
        this.entry,
        this.limits,
        (slot, reply) => this.replied(slot, reply),
        (slot, error) => this.gone(slot, error),
      ),
    );
  }

  private replied(slot: Slot, reply: Reply): void {
    if (reply.ready) {
      slot.ready = true;
      this.dispatch();
      return;
    }
    const job = slot.job;
    if (!job || reply.id !== job.id) return;
    this.finish(slot);
    if (reply.error === undefined) job.resolve(reply.result);
    else job.reject(reply.limit === 'memory' ? this.memoryLimit() : new SandboxJobError(reply.error));
    if (reply.recycle) slot.stop();
    this.dispatch();
  }

  /** The running job took too long: its thread is ended (and replaced on demand). */
  private overtime(slot: Slot): void {
    const job = slot.job;
    if (!job) return;
    this.finish(slot);
    job.reject(
      new SandboxLimitError(
        'time',
        `the policy evaluation took longer than its time limit (${this.settings.timeoutMs}=${this.limits.timeoutMs})`,
      ),
    );
    slot.stop();
  }

  private gone(slot: Slot, error: Error | null): void {
    this.slots.splice(this.slots.indexOf(slot), 1);
    const job = slot.job;
    if (job) {
      this.finish(slot);
      const outOfMemory = (error as { code?: string } | null)?.code === 'ERR_WORKER_OUT_OF_MEMORY';
      job.reject(
        outOfMemory
          ? this.memoryLimit()
          : new SandboxBusyError(`the policy thread stopped: ${error?.message ?? 'it exited'}`, 1),
      );
    } else if (!slot.ready && error) {
      // A thread that cannot start fails what waits for it, rather than being started again and again.
      for (const waiting of this.queue.splice(0)) {
        clearTimeout(waiting.waiting);
        waiting.reject(new SandboxBusyError(`the policy thread could not start: ${error.message}`, 5));
      }
    }
    this.dispatch();
  }

  private finish(slot: Slot): void {
    if (slot.job) clearTimeout(slot.job.timer);
    slot.job = null;
    if (!slot.gone) slot.worker.unref();
  }

  private memoryLimit(): SandboxLimitError {
    return new SandboxLimitError(
      'memory',
      `the policy evaluation ran out of memory (${this.settings.memoryMb}=${this.limits.memoryMb})`,
    );
  }
}
