import cluster from 'node:cluster';
import { ConfigError, configWarnings, loadConfig, type Config } from './config/index.js';
import { consoleToLog, createLogger, type Logger } from './log/index.js';
import { applyHeapGrowth } from './workers/node-flags.js';
import type { RunningServer } from './server.js';

const ADMIN_KEY_MESSAGE = 'Admin API key for this run (set SERVICE_ADMIN_API_KEY to choose one)';

/**
 * `npm start`'s entry point. With WORKERS=1 this process is the server; with more it is the
 * primary of that many worker processes (src/workers/primary.ts), each of which runs this file
 * again and becomes a server of its own on the shared port.
 */
async function main(): Promise<void> {
  const started = exitOnSignalsWhileStarting();
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) failedToStart(error);
    throw error;
  }
  // Before the server allocates: how far its heap grows between full collections (every server process, WORKERS' too).
  applyHeapGrowth(config.heapGrowthPercent);
  if (cluster.isWorker) return runWorker(config, started);
  const log = createLogger(config.logLevel);
  consoleToLog(log);
  for (const warning of configWarnings(config)) log.warn(warning);
  if (config.workers > 1) return runPrimary(config, log, started);
  // Loaded only after the configuration is valid, so that a bad value is reported alone.
  const { startServer } = await import('./server.js');
  const running = await startServer(config, log);
  announce(config, log, running.listening);
  started();
  stopOnSignals(log, () => running.close());
}

/** The primary: the store prepared once, then the workers; it answers no request itself. */
async function runPrimary(config: Config, log: Logger, started: () => void): Promise<void> {
  const { prepareStore } = await import('./server.js');
  const { runPrimary: startWorkers } = await import('./workers/primary.js');
  const { store } = await prepareStore(config, log);
  await store.close();
  const primary = await startWorkers(config, log);
  announce(config, log, primary.listening);
  started();
  stopOnSignals(log, () => primary.close());
}

/** A worker: a whole server on the port the primary shares, with the machine's OPA and the workers' metrics through the primary. */
async function runWorker(config: Config, started: () => void): Promise<void> {
  const { WorkerLink } = await import('./workers/worker.js');
  const link = WorkerLink.connect();
  const log = createLogger(config.logLevel).child({ worker: link.id });
  consoleToLog(log);
  let running: RunningServer | null = null;
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    // Still starting (or standing by): nothing answered yet, nothing to drain.
    if (!running) process.exit(0);
    await running.close().then(
      () => process.exit(0),
      (error: unknown) => exitAfterFailedClose(log, error),
    );
  };
  // From now on, not once started: a primary that stops (or is gone) while this worker starts would otherwise leave it starting alone.
  link.onStop(() => void stop());
  started();
  // Ctrl-C reaches every process of the terminal's group: each worker drains as the primary asks it to.
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
  const { startServer } = await import('./server.js');
  // A standby has loaded its code ahead of need (most of a start): it opens nothing until it takes a dead worker's place.
  if (link.isStandby && (await link.standBy()) === 'stop') process.exit(0);
  running = await startServer(config, log, { worker: link });
  link.ready(running.listening);
}

function announce(config: Config, log: Logger, listening: { public: string; admin: string | null }): void {
  log.info(
    { issuer: config.issuer, store: config.storeUrl.split(':')[0], listening, workers: config.workers },
    listening.admin
      ? `Arbiter is listening on ${listening.public}; the Admin API, the console and /metrics on ${listening.admin}`
      : `Arbiter is listening on ${listening.public}, the Admin API, the console and /metrics included`,
  );
  if (config.adminApiKeyGenerated) {
    // Printed once, on purpose and whatever LOG_LEVEL says: a development start has no other way to learn it.
    const line = { level: 40, time: Date.now(), msg: ADMIN_KEY_MESSAGE, adminApiKey: config.adminApiKey };
    process.stdout.write(`${JSON.stringify(line)}\n`);
  }
}

/** A stop whose closing failed (the store, tracing): said, and exit 1, not an unhandled rejection. */
function exitAfterFailedClose(log: Logger, error: unknown): never {
  log.error({ err: error }, 'stopping failed: not everything was closed');
  process.exit(1);
}

function stopOnSignals(log: Logger, close: () => Promise<void>): void {
  const stop = async (signal: string) => {
    log.info({ signal }, 'stopping');
    await close().then(
      () => process.exit(0),
      (error: unknown) => exitAfterFailedClose(log, error),
    );
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

/**
 * Until the server (or the primary) has started, SIGTERM and SIGINT end the process at once:
 * nothing has been answered, so nothing is to drain, and what was started ends with it (the
 * managed OPA is killed as the process exits; workers stop when their primary is gone). Without a
 * handler, a process that is PID 1 (a container's) ignores SIGTERM: it went on starting, then
 * served, until `docker stop` or Kubernetes killed it. Returns the call that ends this phase.
 */
function exitOnSignalsWhileStarting(): () => void {
  const exit = (signal: NodeJS.Signals) => {
    const line = { level: 30, time: Date.now(), pid: process.pid, signal, msg: 'stopped while starting' };
    process.stdout.write(`${JSON.stringify(line)}\n`);
    process.exit(0);
  };
  process.once('SIGINT', exit);
  process.once('SIGTERM', exit);
  return () => {
    process.off('SIGINT', exit);
    process.off('SIGTERM', exit);
  };
}

/**
 * One JSON line on stderr as every log line is (pino's, level fatal, the error with its type and
 * stack), whatever LOG_LEVEL says (the configuration may be what failed), then exit 1.
 */
function failedToStart(error: unknown): never {
  const err = error instanceof Error ? error : new Error(String(error));
  createLogger('fatal', process.stderr).fatal({ err }, `Arbiter failed to start: ${err.message}`);
  process.exit(1);
}

main().catch(failedToStart);
