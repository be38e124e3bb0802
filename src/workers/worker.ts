/**
 * A worker's side of node:cluster's channel to its primary (src/workers/primary.ts): the
 * machine's OPA to use, its Wasm compilations, the workers that are up (for /healthz), and the
 * metrics of every worker (for /metrics). Everything else the workers share lives in the store.
 */
import cluster from 'node:cluster';
import type { SharedOpa, WasmBuild, WasmCompiler } from '../policy/index.js';
import {
  HEARTBEAT_INTERVAL_MS,
  isPrimaryMessage,
  type OpaLocation,
  type PrimaryMessage,
  type WorkerMessage,
  type WorkersReport,
  STANDBY_ENV,
} from './protocol.js';

/** A compilation takes a second or two; a worker waits this long before asking OPA instead. */
const COMPILE_TIMEOUT_MS = 60_000;
const METRICS_TIMEOUT_MS = 10_000;

type Reply = Extract<PrimaryMessage, { id: number }>;

export class WorkerLink {
  private opa: OpaLocation | null = null;
  private opaKnown: Promise<void>;
  private opaArrived: (error?: string) => void = () => undefined;
  private workers: Omit<WorkersReport, 'answeredBy'> = { configured: 1, up: [], standby: 'none' };
  private readonly waiting = new Map<number, (reply: Reply) => void>();
  private nextId = 1;
  private registry: (() => Promise<unknown[]>) | null = null;
  private readonly stopListeners: (() => void)[] = [];
  private started: (() => void) | null = null;
  private heartbeat: NodeJS.Timeout | null = null;

  private constructor(readonly id: number) {
    this.opaKnown = new Promise((resolve, reject) => {
      this.opaArrived = (error) => (error ? reject(new Error(error)) : resolve());
    });
    process.on('message', (message: unknown) => {
      if (isPrimaryMessage(message)) this.receive(message);
    });
    // The primary is gone (killed outright): nobody supervises this worker any more, so it stops too.
    process.once('disconnect', () => this.stopListeners.forEach((stop) => stop()));
  }

  /** The link of this process, which must be a worker started by the primary. */
  static connect(): WorkerLink {
    if (!cluster.isWorker || !cluster.worker) throw new Error('not a worker process');
    return new WorkerLink(cluster.worker.id);
  }

  /** Whether the primary forked this worker as a standby (it must wait for `standBy` before it starts). */
  get isStandby(): boolean {
    return process.env[STANDBY_ENV] === '1';
  }

  /**
   * A standby worker, its code loaded: tells the primary, then resolves 'start' once it is to
   * take a dead worker's place, or 'stop' when the primary stops (or is gone) first.
   */
  standBy(): Promise<'start' | 'stop'> {
    return new Promise((resolve) => {
      this.started = () => resolve('start');
      this.onStop(() => resolve('stop'));
      this.send({ kind: 'arbiter:standing-by' });
      this.beat();
    });
  }

  /** Tells the primary where this worker listens; resolves once the machine's OPA is known (it starts it for the first worker). */
  async listening(url: string, adminUrl: string | null): Promise<void> {
    this.send({ kind: 'arbiter:listening', url, adminUrl });
    await this.opaKnown;
  }

  /** startServer has finished: the primary counts this worker as up. */
  ready(listening: { public: string; admin: string | null }): void {
    this.send({ kind: 'arbiter:ready', listening });
    this.beat();
  }

  /**
   * Says `arbiter:alive` every second from now on, from the event loop: a worker whose loop stops
   * (blocked, or the process stopped) falls silent, and the primary replaces it. Not before its
   * code is loaded: loading blocks the loop for seconds on a busy machine.
   */
  private beat(): void {
    this.heartbeat ??= setInterval(() => this.send({ kind: 'arbiter:alive' }), HEARTBEAT_INTERVAL_MS).unref();
    this.send({ kind: 'arbiter:alive' });
  }

  /** The machine's managed OPA (null when OPA_URL names an external one, which every worker uses directly). */
  sharedOpa(): SharedOpa | undefined {
    if (!this.opa) return undefined;
    const token = this.opa.token;
    return {
      url: () => this.opa?.url ?? 'http://127.0.0.1:0',
      token,
      pid: () => this.opa?.pid,
    };
  }

  /** Compiles a revision through the primary, which compiles each revision once for every worker. */
  readonly compileWasm: WasmCompiler = async (bundle, revision) => {
    const reply = await this.request(
      (id) => ({ kind: 'arbiter:compile', id, revision, bundle: new Uint8Array(bundle) }),
      COMPILE_TIMEOUT_MS,
    );
    if (reply.kind !== 'arbiter:compiled') throw new Error(`unexpected answer ${reply.kind}`);
    if ('error' in reply.build) throw new Error(reply.build.error);
    return reply.build as WasmBuild;
  };

  /** What /healthz says of the workers: those up, and this one. */
  report(): WorkersReport {
    return { ...this.workers, answeredBy: { id: this.id, pid: process.pid } };
  }

  /** This worker's own metrics, which the primary asks every worker for when a scrape comes. */
  serveRegistry(metrics: () => Promise<unknown[]>): void {
    this.registry = metrics;
  }

  /** Prometheus' text of every worker's metrics, summed by the primary (prom-client's AggregatorRegistry). */
  async clusterMetrics(): Promise<string> {
    const reply = await this.request((id) => ({ kind: 'arbiter:metrics', id }), METRICS_TIMEOUT_MS);
    if (reply.kind !== 'arbiter:metrics' || reply.text === null)
      throw new Error(`the primary could not gather the workers' metrics: ${(reply as { error?: string }).error}`);
    return reply.text;
  }

  /** Called when the primary says stop (SIGTERM on the machine) or is gone. */
  onStop(listener: () => void): void {
    this.stopListeners.push(listener);
  }

  private receive(message: PrimaryMessage): void {
    switch (message.kind) {
      case 'arbiter:opa':
        this.opa = message.opa;
        this.opaArrived(message.error);
        return;
      case 'arbiter:workers':
        this.workers = { configured: message.configured, up: message.up, standby: message.standby };
        return;
      case 'arbiter:registry':
        void this.sendRegistry(message.id);
        return;
      case 'arbiter:stop':
        this.stopListeners.forEach((stop) => stop());
        return;
      case 'arbiter:start':
        this.started?.();
        this.started = null;
        return;
      default:
        this.waiting.get(message.id)?.(message);
        this.waiting.delete(message.id);
    }
  }

  private async sendRegistry(id: number): Promise<void> {
    const metrics = (await this.registry?.().catch(() => null)) ?? [];
    this.send({ kind: 'arbiter:registry', id, metrics });
  }

  private request(message: (id: number) => WorkerMessage, timeoutMs: number): Promise<Reply> {
    const id = this.nextId++;
    return new Promise<Reply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`the primary did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      this.waiting.set(id, (reply) => {
        clearTimeout(timer);
        resolve(reply);
      });
      this.send(message(id));
    });
  }

  /**
   * A message the channel fails to carry (the primary is gone) is lost: a request waiting for its
   * answer times out. With no callback, Node would raise the failure as an 'error' event of the
   * process, which would stop this worker in the middle of its drain.
   */
  private send(message: WorkerMessage): void {
    if (process.connected) process.send?.(message, undefined, undefined, () => undefined);
  }
}
