/**
 * WORKERS > 1: this process is the primary of that many server processes (node:cluster), which
 * share the port and the store. The primary answers no request itself. It
 *
 * - starts the workers, and replaces one that dies (back-off: 250 ms, doubling up to 30 s,
 *   starting over once a worker has run 30 s), so that the others keep answering meanwhile. A
 *   worker's start is mostly loading its code (seconds on a busy machine, 7 s at a load of 15 on
 *   two cores), so one more worker is kept loaded as a **standby**, which opens nothing and
 *   does not listen: a dead worker's place goes to it, and it serves within a second or so;
 *   the next standby is forked once it is up;
 * - kills a worker whose event loop falls silent (no `arbiter:alive` for WORKER_HEARTBEAT_TIMEOUT_MS),
 *   and replaces it as a dead one;
 * - runs the machine's one managed OPA, started once the first worker listens (OPA polls the
 *   bundle through the shared port, whichever worker answers), and tells every worker where it is;
 * - compiles each policy revision to Wasm once for all workers (Rego in process);
 * - sums the workers' metrics for GET /metrics (prom-client's AggregatorRegistry) and tells every
 *   worker which workers are up (for /healthz);
 * - on SIGTERM tells every worker to stop (each drains its requests in flight, writing their audit
 *   entries, and closes its store), then stops OPA.
 */
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, Counter, Gauge, Registry } from 'prom-client';
import type { Config } from '../config/index.js';
import type { Logger } from '../log/index.js';
import {
  BUNDLE_PATH,
  localWasmCompiler,
  ManagedOpa,
  managedOpaSettings,
  resolveOpaBinary,
  configureOpaSandbox,
  type WasmBuild,
  type WasmCompiler,
} from '../policy/index.js';
import {
  HEARTBEAT_INTERVAL_MS,
  isWorkerMessage,
  STANDBY_ENV,
  type OpaLocation,
  type PrimaryMessage,
  type WorkerMessage,
  type WorkerStatus,
} from './protocol.js';
import { withServerNodeFlags } from './node-flags.js';
import { MachineOpa } from './machine-opa.js';

const FIRST_RESTART_DELAY_MS = 250;
const MAX_RESTART_DELAY_MS = 30_000;
/** A worker that ran this long was healthy: its slot's back-off starts over. */
const STABLE_RUN_MS = 30_000;
/** A worker drains for up to 10 s (server.ts SHUTDOWN_GRACE_MS); past this it is killed. */
const STOP_TIMEOUT_MS = 15_000;
/** Revisions whose compilation is kept: the live one and the few before it (a rollback). */
const COMPILED_REVISIONS_KEPT = 4;
const REGISTRY_TIMEOUT_MS = 5_000;
/** A standby that died (not by taking a place) is forked again after this long: never in a tight loop. */
const STANDBY_RETRY_MS = 5_000;

export interface RunningPrimary {
  /** The addresses the workers listen on (the first worker's description), for the start-up line. */
  listening: { public: string; admin: string | null };
  /** The workers answering now. */
  workersUp(): WorkerStatus[];
  /** The managed OPA's pid (undefined with OPA_URL, or while it restarts). */
  opaPid(): number | undefined;
  /** Stops every worker (each drains its requests in flight), then OPA. */
  close(): Promise<void>;
}

/** One of the WORKERS places: the worker in it now and how often it failed lately. */
interface Slot {
  worker: Worker | null;
  startedAt: number;
  crashes: number;
  restart: NodeJS.Timeout | null;
  /** When its last worker died (epoch ms), until the replacement is up: the replacement's delay is logged. */
  diedAt: number | null;
}

/** The loaded worker kept to take a dead worker's place: `loaded` once it said so (arbiter:standing-by). */
interface Standby {
  worker: Worker;
  loaded: boolean;
}

/** Starts the workers and resolves once each has answered ready (rejects if one fails before any did). */
export async function runPrimary(config: Config, log: Logger): Promise<RunningPrimary> {
  const primary = new Primary(config, log);
  return primary.start();
}

class Primary {
  private readonly slots: Slot[];
  private readonly up = new Map<number, WorkerStatus>();
  /** The machine's OPA (none with OPA_URL), made for the first worker that listens. */
  private opa: MachineOpa | null = null;
  /** The stop under way: a second signal (SIGINT after SIGTERM) waits for the same one, not exits before the workers drained. */
  private closing: Promise<void> | null = null;

  private get stopping(): boolean {
    return this.closing !== null;
  }
  private everReady = false;
  private listening: RunningPrimary['listening'] | null = null;
  private readonly compiler: WasmCompiler;
  private readonly compiled = new Map<string, Promise<WasmBuild>>();
  private readonly registryReplies = new Map<number, (metrics: unknown[]) => void>();
  private nextRequest = 1;
  private readonly registry = new Registry();
  private readonly restarts = new Counter({
    name: 'arbiter_worker_restarts_total',
    help: 'Workers replaced after they died',
    registers: [this.registry],
  });
  private startFailed: (error: Error) => void = () => undefined;
  private allReady: () => void = () => undefined;
  private readonly log: Logger;
  private standby: Standby | null = null;
  private standbyRetry: NodeJS.Timeout | null = null;
  /** Places whose worker died while the standby was still loading: it is further along than a new fork would be. */
  private awaitingStandby: Slot[] = [];
  /** When each ready or standing-by worker last said `arbiter:alive`. */
  private readonly lastHeard = new Map<Worker, number>();
  private liveness: NodeJS.Timeout | null = null;

  constructor(
    private readonly config: Config,
    /** The server's logger: OPA's lines are its child, not the primary's (pino would write `component` twice). */
    private readonly rootLog: Logger,
  ) {
    this.log = rootLog.child({ component: 'primary' });
    this.slots = Array.from({ length: config.workers }, () => ({
      worker: null,
      startedAt: 0,
      crashes: 0,
      restart: null,
      diedAt: null,
    }));
    configureOpaSandbox(config);
    this.compiler = localWasmCompiler(resolveOpaBinary(config.opaBin), 'live');
    const up = this.up;
    new Gauge({
      name: 'arbiter_workers_up',
      help: 'Worker processes answering requests (WORKERS configured)',
      registers: [this.registry],
      collect() {
        this.set(up.size);
      },
    });
  }

  async start(): Promise<RunningPrimary> {
    // Each worker with the server's Node.js options (node-flags.ts), as this process was started by npm start or the image.
    cluster.setupPrimary({
      serialization: 'advanced',
      execArgv: withServerNodeFlags(process.execArgv, process.env.NODE_OPTIONS),
    });
    const started = new Promise<void>((resolve, reject) => {
      this.allReady = resolve;
      this.startFailed = reject;
    });
    this.slots.forEach((slot) => this.fork(slot));
    this.watchLiveness();
    try {
      await started;
    } catch (error) {
      await this.close();
      throw error;
    }
    this.log.info({ workers: this.config.workers, opa: this.opa?.url }, 'every worker is up');
    return {
      listening: this.listening!,
      workersUp: () => [...this.up.values()],
      opaPid: () => this.opa?.pid,
      close: () => this.close(),
    };
  }

  private fork(slot: Slot): void {
    const worker = this.spawn(false);
    this.seat(slot, worker ?? null);
    if (!worker) this.exited(slot, null, 'it could not be started');
  }

  private seat(slot: Slot, worker: Worker | null): void {
    slot.restart = null;
    slot.worker = worker;
    slot.startedAt = Date.now();
  }

  /**
   * A new worker process, or null when it cannot be forked at all (a spawn error Node throws). One
   * whose process never starts (ENOENT, EAGAIN, EMFILE: Node reports them as an 'error' event, and
   * no 'exit' ever follows) is handled as a worker that exited, so that its place is filled again.
   */
  private spawn(standby: boolean): Worker | null {
    let worker: Worker;
    try {
      // The same generated secrets in every worker: the Admin key printed once, the bundle token OPA presents to any of them.
      worker = cluster.fork({
        SERVICE_ADMIN_API_KEY: this.config.adminApiKey,
        POLICY_BUNDLE_TOKEN: this.config.policyBundleToken,
        [STANDBY_ENV]: standby ? '1' : '0',
      });
    } catch (error) {
      this.log.error({ err: error }, 'a worker process could not be forked');
      return null;
    }
    let ended = false;
    const end = (reason: string) => {
      if (ended) return;
      ended = true;
      this.lastHeard.delete(worker);
      const slot = this.slots.find((each) => each.worker === worker);
      if (slot) this.exited(slot, worker, reason);
      else if (this.standby?.worker === worker) this.standbyExited(reason);
    };
    worker.on('error', (error: Error) => {
      // Any other failure of its channel or process: said, never an unhandled 'error' that stops the primary.
      this.log.warn({ worker: worker.id, err: error }, 'a worker process failed');
      if (worker.process.pid === undefined) end(`it could not be started: ${error.message}`);
    });
    worker.on('message', (message: unknown) => {
      if (isWorkerMessage(message))
        this.receive(worker, message).catch((error: unknown) =>
          this.log.error(
            { worker: worker.id, kind: message.kind, err: error },
            "a worker's message could not be handled",
          ),
        );
    });
    worker.once('exit', (code, signal) => end(signal ? `signal ${signal}` : `code ${code}`));
    return worker;
  }

  /** Keeps one loaded worker in reserve, once every place is served (its loading would slow a start down). */
  private forkStandby(): void {
    if (!this.config.workerStandby || this.stopping || this.standby || this.standbyRetry) return;
    if (this.up.size < this.config.workers) return;
    const worker = this.spawn(true);
    if (!worker) return this.standbyExited('it could not be started');
    this.standby = { worker, loaded: false };
    this.broadcastWorkers();
  }

  private standbyExited(reason: string): void {
    this.standby = null;
    if (this.stopping) return;
    this.broadcastWorkers();
    for (const slot of this.awaitingStandby.splice(0)) this.fork(slot);
    this.log.warn({ reason, retryInMs: STANDBY_RETRY_MS }, 'the standby worker stopped; another is forked');
    this.standbyRetry = setTimeout(() => {
      this.standbyRetry = null;
      this.forkStandby();
    }, STANDBY_RETRY_MS);
  }

  /**
   * A dead worker's place: to the standby (it only has to open the store and listen), as soon as
   * it has loaded its code; else to a new worker.
   */
  private replace(slot: Slot): void {
    const standby = this.standby;
    if (!standby?.worker.isConnected()) this.fork(slot);
    else if (standby.loaded) this.promote(slot, standby.worker);
    else this.awaitingStandby.push(slot);
  }

  private promote(slot: Slot, worker: Worker): void {
    this.standby = null;
    this.seat(slot, worker);
    this.send(worker, { kind: 'arbiter:start' });
  }

  /** The standby has loaded its code: a place that waits for it gets it, any other waiting one a new worker. */
  private standbyLoaded(worker: Worker): void {
    if (this.standby?.worker !== worker) return;
    this.standby.loaded = true;
    const [first, ...others] = this.awaitingStandby.splice(0);
    if (first) this.promote(first, worker);
    for (const slot of others) this.fork(slot);
    this.broadcastWorkers();
  }

  private async receive(worker: Worker, message: WorkerMessage): Promise<void> {
    switch (message.kind) {
      case 'arbiter:listening':
        this.send(worker, { kind: 'arbiter:opa', ...(await this.startOpa(message.url, message.adminUrl)) });
        return;
      case 'arbiter:ready':
        this.workerReady(worker, message.listening);
        return;
      case 'arbiter:compile':
        this.send(worker, { kind: 'arbiter:compiled', id: message.id, build: await this.compile(message) });
        return;
      case 'arbiter:metrics':
        this.send(worker, { kind: 'arbiter:metrics', id: message.id, ...(await this.metrics()) });
        return;
      case 'arbiter:registry':
        this.registryReplies.get(message.id)?.(message.metrics);
        return;
      case 'arbiter:standing-by':
        this.standbyLoaded(worker);
        return;
      case 'arbiter:alive':
        // A beat read after its worker was killed (for its silence, or at a stop) or ended does not watch it again.
        if (!worker.process.killed && !worker.isDead()) this.lastHeard.set(worker, Date.now());
        return;
    }
  }

  /**
   * A worker whose event loop stopped (blocked, or its process stopped) keeps its share of the
   * port: node:cluster goes on handing it connections, which wait for ever, and it still counts as
   * up. One silent for WORKER_HEARTBEAT_TIMEOUT_MS is killed, and replaced as a dead worker is.
   */
  private watchLiveness(): void {
    let checkedAt = Date.now();
    this.liveness = setInterval(() => {
      const now = Date.now();
      // This process was the one held up: the beats it has not read yet are no silence of the workers'.
      if (now - checkedAt > 2 * HEARTBEAT_INTERVAL_MS)
        for (const worker of this.lastHeard.keys()) this.lastHeard.set(worker, now);
      checkedAt = now;
      if (this.stopping) return;
      for (const [worker, heardAt] of this.lastHeard) {
        if (now - heardAt <= this.config.workerHeartbeatTimeoutMs) continue;
        this.lastHeard.delete(worker);
        this.log.error(
          { worker: worker.id, pid: worker.process.pid, silentMs: now - heardAt },
          'a worker stopped answering its heartbeat; killed, to be replaced as a dead one is',
        );
        worker.process.kill('SIGKILL');
      }
    }, HEARTBEAT_INTERVAL_MS).unref();
  }

  /**
   * The machine's OPA, started for the first worker that listens: it fetches the bundle where
   * that worker said operators' traffic goes (the admin listener, when there is one), which
   * every worker serves. Null with OPA_URL: every worker asks that OPA itself.
   */
  private async startOpa(url: string, adminUrl: string | null): Promise<{ opa: OpaLocation | null; error?: string }> {
    if (this.config.opaUrl) return { opa: null };
    this.opa ??= new MachineOpa(
      (onStarted) =>
        new ManagedOpa({
          ...managedOpaSettings(this.config),
          bundleUrl: `${adminUrl ?? url}${BUNDLE_PATH}`,
          log: this.rootLog.child({ component: 'opa' }),
          onStarted,
        }),
      // A restarted OPA may listen on another port: every worker follows it.
      (location) => this.broadcast({ kind: 'arbiter:opa', opa: location }),
    );
    const answer = await this.opa.whereFor();
    if (answer.error) this.startFailed(new Error(answer.error));
    return answer;
  }

  private workerReady(worker: Worker, listening: RunningPrimary['listening']): void {
    const pid = worker.process.pid ?? 0;
    this.up.set(worker.id, { id: worker.id, pid, since: new Date().toISOString() });
    this.listening ??= listening;
    this.everReady = true;
    this.broadcastWorkers();
    const slot = this.slots.find((each) => each.worker === worker);
    if (slot?.diedAt) {
      this.log.info(
        { worker: worker.id, pid, msSinceDeath: Date.now() - slot.diedAt },
        "a dead worker's replacement answers requests",
      );
      slot.diedAt = null;
    }
    if (this.up.size === this.config.workers) {
      this.allReady();
      this.forkStandby();
    }
  }

  /** Each revision compiled once, however many workers ask (they all ask within the same second). */
  private async compile(request: { revision: string; bundle: Uint8Array }): Promise<WasmBuild | { error: string }> {
    let build = this.compiled.get(request.revision);
    if (!build) {
      const started = Date.now();
      build = this.compiler(Buffer.from(request.bundle), request.revision);
      void build.then(
        (done) =>
          this.log.info(
            {
              revision: request.revision,
              ms: Date.now() - started,
              ...('problem' in done ? { problem: done.problem } : {}),
            },
            'policy revision compiled to Wasm once for every worker',
          ),
        () => undefined,
      );
      this.compiled.set(request.revision, build);
      // A failure to run OPA is tried again at the next request, as a lone process does.
      build.catch(() => this.compiled.delete(request.revision));
      while (this.compiled.size > COMPILED_REVISIONS_KEPT) this.compiled.delete(this.compiled.keys().next().value!);
    }
    return build.catch((error: unknown) => ({ error: (error as Error).message }));
  }

  /** Every up worker's registry, summed as prom-client's AggregatorRegistry does, with the primary's own gauges. */
  private async metrics(): Promise<{ text: string | null; error?: string }> {
    try {
      const workers = [...this.up.keys()].map((id) => cluster.workers?.[id]).filter((worker) => worker !== undefined);
      const each = await Promise.all(workers.map((worker) => this.registryOf(worker)));
      const mine = await this.registry.getMetricsAsJSON();
      const all = [...each.filter((metrics) => metrics !== null), mine];
      return { text: await AggregatorRegistry.aggregate(all).metrics() };
    } catch (error) {
      return { text: null, error: (error as Error).message };
    }
  }

  /** One worker's metrics as JSON; null when it does not answer in time (it may be stopping). */
  private registryOf(worker: Worker): Promise<unknown[] | null> {
    const id = this.nextRequest++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.registryReplies.delete(id);
        resolve(null);
      }, REGISTRY_TIMEOUT_MS);
      this.registryReplies.set(id, (metrics) => {
        clearTimeout(timer);
        this.registryReplies.delete(id);
        resolve(metrics);
      });
      this.send(worker, { kind: 'arbiter:registry', id });
    });
  }

  /** `worker` null: none could be forked for the place. */
  private exited(slot: Slot, worker: Worker | null, reason: string): void {
    if (worker) this.up.delete(worker.id);
    if (slot.worker === worker) slot.worker = null;
    this.broadcastWorkers();
    if (this.stopping) return;
    if (!this.everReady) {
      this.startFailed(
        new Error(`worker ${worker?.id ?? '(not forked)'} ended before any worker was ready: ${reason}`),
      );
      return;
    }
    slot.diedAt ??= Date.now();
    if (Date.now() - slot.startedAt > STABLE_RUN_MS) slot.crashes = 0;
    const delay = Math.min(MAX_RESTART_DELAY_MS, FIRST_RESTART_DELAY_MS * 2 ** slot.crashes);
    slot.crashes += 1;
    this.restarts.inc();
    this.log.error(
      { worker: worker?.id, pid: worker?.process.pid, reason, restartInMs: delay },
      'a worker stopped unexpectedly; the others answer until its replacement is up',
    );
    slot.restart = setTimeout(() => this.replace(slot), delay);
  }

  private broadcastWorkers(): void {
    const standby = !this.standby ? 'none' : this.standby.loaded ? 'ready' : 'loading';
    this.broadcast({ kind: 'arbiter:workers', configured: this.config.workers, up: [...this.up.values()], standby });
  }

  private broadcast(message: PrimaryMessage): void {
    for (const worker of Object.values(cluster.workers ?? {})) if (worker) this.send(worker, message);
  }

  /**
   * A message to a worker whose channel fails as it goes (it exits, or was killed) is lost, and
   * its exit handled as any: with no callback, Node would raise the failure as an 'error' event
   * of the worker, which nothing listens to, and that stops the primary (exit code 1).
   */
  private send(worker: Worker, message: PrimaryMessage): void {
    if (!worker.isConnected()) return;
    worker.send(message, undefined, (error: Error | null) => {
      if (error)
        this.log.debug({ worker: worker.id, kind: message.kind, err: error }, 'a message to a worker was lost');
    });
  }

  /** Every worker drains and exits (killed if it takes too long), then OPA stops. */
  private close(): Promise<void> {
    this.closing ??= this.stopEverything();
    return this.closing;
  }

  private async stopEverything(): Promise<void> {
    for (const slot of this.slots) if (slot.restart) clearTimeout(slot.restart);
    if (this.liveness) clearInterval(this.liveness);
    if (this.standbyRetry) clearTimeout(this.standbyRetry);
    // Not one whose process never started: it will send no 'exit' to wait for.
    const workers = Object.values(cluster.workers ?? {}).filter(
      (worker): worker is Worker => worker?.process.pid !== undefined,
    );
    await Promise.all(workers.map((worker) => this.stopWorker(worker)));
    await this.opa?.stop();
  }

  private async stopWorker(worker: Worker): Promise<void> {
    if (worker.isDead()) return;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    this.send(worker, { kind: 'arbiter:stop' });
    const timer = setTimeout(() => {
      this.log.warn({ worker: worker.id }, 'a worker did not stop in time; killed');
      worker.process.kill('SIGKILL');
    }, STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  }
}
