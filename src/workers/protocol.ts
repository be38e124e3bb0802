/**
 * The messages a primary and its workers exchange over node:cluster's IPC channel (with
 * `serialization: 'advanced'`, so that a compiled Wasm module crosses as bytes). Every kind is
 * prefixed, so that other users of the channel (prom-client's own cluster messages) pass by.
 */
import type { WasmBuild } from '../policy/index.js';

/** A worker as the primary reports it on /healthz. */
export interface WorkerStatus {
  /** node:cluster's id: 1, 2, … in the order the workers were started (a replacement gets a new one). */
  id: number;
  pid: number;
  /** When it began answering requests. */
  since: string;
}

export type StandbyState = 'loading' | 'ready' | 'none';

/** What /healthz says of the workers of this machine. */
export interface WorkersReport {
  configured: number;
  /** The workers answering requests now. */
  up: WorkerStatus[];
  /** The worker kept to take a dead one's place: loading its code, ready to start, or none (being forked again). */
  standby: StandbyState;
  /** The worker that answered this request. */
  answeredBy: { id: number; pid: number };
}

/** The machine's OPA as the primary runs it: where, with which token, which process. */
export interface OpaLocation {
  url: string;
  token: string;
  pid: number | undefined;
}

/** Worker → primary. `id` pairs a request with its reply. */
export type WorkerMessage =
  /** The worker listens (these are its reachable URLs); it waits for the machine's OPA. */
  | { kind: 'arbiter:listening'; url: string; adminUrl: string | null }
  /** startServer has finished: the worker answers requests (on these addresses, for the start-up line). */
  | { kind: 'arbiter:ready'; listening: { public: string; admin: string | null } }
  /** Compile this revision's bundle to Wasm (once for the machine). */
  | { kind: 'arbiter:compile'; id: number; revision: string; bundle: Uint8Array }
  /** The metrics of every worker, summed (for GET /metrics). */
  | { kind: 'arbiter:metrics'; id: number }
  /** The answer to the primary's `arbiter:registry`: this worker's metrics as prom-client's JSON. */
  | { kind: 'arbiter:registry'; id: number; metrics: unknown[] }
  /** A standby worker has loaded its code and waits for `arbiter:start` (it does not listen yet). */
  | { kind: 'arbiter:standing-by' }
  /** Every HEARTBEAT_INTERVAL_MS once ready or standing by: this worker's event loop runs. */
  | { kind: 'arbiter:alive' };

/** Primary → worker. */
export type PrimaryMessage =
  /**
   * The machine's OPA (after `arbiter:listening`, and again whenever it moved): null with OPA_URL
   * (each worker asks that one), or with `error` when it could not be started.
   */
  | { kind: 'arbiter:opa'; opa: OpaLocation | null; error?: string }
  /** The workers that are up, after every change. */
  | { kind: 'arbiter:workers'; configured: number; up: WorkerStatus[]; standby: StandbyState }
  | { kind: 'arbiter:compiled'; id: number; build: WasmBuild | { error: string } }
  | { kind: 'arbiter:metrics'; id: number; text: string | null; error?: string }
  /** Send your metrics (prom-client's JSON of your registry). */
  | { kind: 'arbiter:registry'; id: number }
  /** Stop: drain the requests in flight (their audit entries written), close, exit. */
  | { kind: 'arbiter:stop' }
  /** To a standby worker: take the place of a worker that died (open the store, listen, serve). */
  | { kind: 'arbiter:start' };

/** How often a ready or standing-by worker says `arbiter:alive` (WORKER_HEARTBEAT_TIMEOUT_MS is the silence the primary allows). */
export const HEARTBEAT_INTERVAL_MS = 1_000;

/** Set in the environment of a worker forked as a standby (see src/workers/primary.ts). */
export const STANDBY_ENV = 'ARBITER_WORKER_STANDBY';

export function isWorkerMessage(message: unknown): message is WorkerMessage {
  return hasArbiterKind(message);
}

export function isPrimaryMessage(message: unknown): message is PrimaryMessage {
  return hasArbiterKind(message);
}

function hasArbiterKind(message: unknown): boolean {
  const kind = (message as { kind?: unknown } | null)?.kind;
  return typeof kind === 'string' && kind.startsWith('arbiter:');
}
