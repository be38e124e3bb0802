/**
 * The embedded default: a local `opa run --server` on loopback, answering only requests that bear
 * a random token of this process, polling this server's bundle endpoint, restarted when it dies
 * and stopped with the server. With OPA_URL set, none of this runs (see docs/policy.md, "External OPA").
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../../config/index.js';
import type { Logger } from '../../log/index.js';
import { resolveOpaBinary } from './binary.js';
import { isAlive } from './scratch.js';

/** The name OPA knows Arbiter's bundle by (an external OPA must use the same, see docs/policy.md). */
export const OPA_BUNDLE_NAME = 'arbiter';

export interface ManagedOpaOptions {
  binary: string;
  /** Full URL of GET /policy/bundle.tar.gz on this server. */
  bundleUrl: string;
  bundleToken: string;
  pollMinSeconds: number;
  pollMaxSeconds: number;
  /** How often a running OPA's health is asked (OPA_HEALTH_CHECK_INTERVAL_MS). */
  healthCheckIntervalMs: number;
  log: Logger;
  /** Fixed loopback port; default: a free one. */
  port?: number;
  /** The token every request to OPA's REST API must bear; default: a random one for this process. */
  apiToken?: string;
  /** Told after every start and restart (a restart may take another port): the primary tells its workers. */
  onStarted?: (url: string, pid: number | undefined) => void;
}

/** The bearer token reaches OPA through its config's ${VAR} substitution: never on a command line or on disk. */
const TOKEN_VARIABLE = 'ARBITER_POLICY_BUNDLE_TOKEN';
const STARTUP_TIMEOUT_MS = 15_000;
/** Starts tried (each on a fresh port) before the server gives up on OPA. */
const START_ATTEMPTS = 3;

/** OPA exited before it answered (a port taken meanwhile, a bad config), as opposed to not answering in time. */
class OpaExitedError extends Error {}
const STOP_GRACE_MS = 3_000;
const MAX_RESTART_DELAY_MS = 30_000;
/** A process that ran this long is considered healthy again: the restart back-off starts over. */
const STABLE_RUN_MS = 30_000;
/**
 * The managed OPA's options that come from the configuration: the same for a server's own OPA
 * (policy/engine.ts) and the one a primary starts for its workers (workers/primary.ts).
 */
export function managedOpaSettings(
  config: Pick<
    Config,
    'opaBin' | 'policyBundleToken' | 'policyPollMinSeconds' | 'policyPollMaxSeconds' | 'opaHealthCheckIntervalMs'
  >,
): Pick<ManagedOpaOptions, 'binary' | 'bundleToken' | 'pollMinSeconds' | 'pollMaxSeconds' | 'healthCheckIntervalMs'> {
  return {
    binary: resolveOpaBinary(config.opaBin),
    bundleToken: config.policyBundleToken,
    pollMinSeconds: config.policyPollMinSeconds,
    pollMaxSeconds: config.policyPollMaxSeconds,
    healthCheckIntervalMs: config.opaHealthCheckIntervalMs,
  };
}

const CONFIG_DIR_PREFIX = 'arbiter-opa-';
const OWNER_PID_FILE = 'owner.pid';
const OPA_PID_FILE = 'opa.pid';
const AUTHZ_POLICY_FILE = 'authz.rego';
/** How long one answer to a health check may take. */
const HEALTH_CHECK_TIMEOUT_MS = 1_000;
/** Health checks missed in a row after which OPA counts as hung and is restarted. */
const HUNG_AFTER_FAILURES = 3;
/** OPA's long-poll timeout; the server answers a second before it (bundle/route.ts). */
const LONG_POLL_SECONDS = 30;

export class ManagedOpa {
  private child: ChildProcess | null = null;
  private port: number | null;
  private configDir: string | null = null;
  private stopping = false;
  private restarts = 0;
  private restartTimer: NodeJS.Timeout | null = null;
  private healthTimer: NodeJS.Timeout | null = null;
  private readonly killOnExit = () => this.child?.kill('SIGKILL');
  /** OPA's REST API answers only requests bearing it (any local process could otherwise read and write OPA's data). */
  readonly apiToken: string;

  constructor(private readonly options: ManagedOpaOptions) {
    this.port = options.port ?? null;
    this.apiToken = options.apiToken ?? randomBytes(32).toString('base64url');
  }

  /** Base URL of OPA's REST API (valid once started). */
  get url(): string {
    return `http://127.0.0.1:${this.port ?? 0}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Spawns OPA and resolves once its HTTP API answers (the bundle may still be loading). */
  async start(): Promise<void> {
    this.stopping = false;
    await cleanUpAfterCrashedOwners(this.options.log);
    this.configDir ??= await this.writeConfig();
    const fixedPort = this.port !== null;
    this.port ??= await freePort();
    process.on('exit', this.killOnExit);
    try {
      for (let attempt = 1; ; attempt += 1) {
        try {
          await this.spawnAndWait();
          break;
        } catch (error) {
          // The free port found may be taken by another process before OPA binds it (many servers
          // starting on one machine): OPA then exits at once. Another port, a few times.
          if (fixedPort || attempt >= START_ATTEMPTS || !(error instanceof OpaExitedError)) throw error;
          this.options.log.warn({ err: error, attempt }, 'managed OPA exited at start; trying another port');
          this.port = await freePort();
        }
      }
    } catch (error) {
      await this.stop();
      throw new Error(
        `${(error as Error).message} (install OPA with scripts/install-opa.sh, or set OPA_BIN or OPA_URL)`,
        { cause: error },
      );
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    if (this.healthTimer) clearTimeout(this.healthTimer);
    process.off('exit', this.killOnExit);
    await this.terminate();
    // A leftover folder is not worth a failed stop (exit code 1): the next start cleans up after it.
    if (this.configDir)
      await rm(this.configDir, { recursive: true, force: true, maxRetries: 3 }).catch((error: unknown) =>
        this.options.log.warn({ err: error, dir: this.configDir }, "the managed OPA's folder could not be removed"),
      );
    this.configDir = null;
  }

  private async spawnAndWait(): Promise<void> {
    const child = spawn(this.options.binary, this.arguments(), {
      // Nothing of the server's environment (its secrets) for a rule's opa.runtime() to read:
      // only the variable OPA's config needs (sandbox.ts keeps such builtins out of the bundle too).
      env: { [TOKEN_VARIABLE]: this.options.bundleToken },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    // Who to clean up after, should this server die without stopping OPA (SIGKILL, OOM kill).
    if (child.pid && this.configDir)
      await writeFile(join(this.configDir, OPA_PID_FILE), String(child.pid)).catch(() => undefined);
    const startedAt = Date.now();
    let alive = true;
    const exited = new Promise<string>((resolve) => {
      child.once('error', (error) => resolve(error.message));
      child.once('exit', (code, signal) => resolve(`exited with ${signal ?? `code ${code}`}`));
    }).finally(() => {
      alive = false;
    });
    this.forwardLogs(child);
    void exited.then((reason) => this.onExit(child, reason, Date.now() - startedAt));
    const healthy = waitForHealth(this.url, this.apiToken, STARTUP_TIMEOUT_MS, () => alive);
    const outcome = await Promise.race([exited.then((reason) => ({ reason })), healthy]);
    if (outcome !== true) {
      child.kill('SIGKILL');
      if (outcome !== false) throw new OpaExitedError(`OPA (${this.options.binary}) did not start: ${outcome.reason}`);
      throw new Error(`OPA (${this.options.binary}) did not answer on ${this.url} within ${STARTUP_TIMEOUT_MS} ms`);
    }
    this.options.log.info({ opa: this.url, pid: child.pid }, 'managed OPA started');
    this.options.onStarted?.(this.url, child.pid);
    this.watch(child);
  }

  /**
   * A hung OPA (stopped, deadlocked, starved) keeps its port and its process, so nothing else
   * would notice: every decision it is asked waits for its timeout, forever. Its health is
   * asked every `healthCheckIntervalMs`; after HUNG_AFTER_FAILURES answers missed in a row it
   * is killed, and the exit handler restarts it as after any crash.
   */
  private watch(child: ChildProcess): void {
    let missed = 0;
    const check = async () => {
      if (this.child !== child || this.stopping) return;
      missed = (await answersHealth(this.url, this.apiToken)) ? 0 : missed + 1;
      if (this.child !== child || this.stopping) return;
      if (missed >= HUNG_AFTER_FAILURES) {
        this.options.log.error(
          { pid: child.pid, missedChecks: missed },
          'managed OPA stopped answering its health check; killing it to restart it',
        );
        child.kill('SIGKILL');
        return;
      }
      this.healthTimer = setTimeout(() => void check(), this.options.healthCheckIntervalMs);
      this.healthTimer.unref();
    };
    this.healthTimer = setTimeout(() => void check(), this.options.healthCheckIntervalMs);
    this.healthTimer.unref();
  }

  private arguments(): string[] {
    return [
      'run',
      '--server',
      '--addr',
      `127.0.0.1:${this.port}`,
      '--config-file',
      join(this.configDir as string, 'config.json'),
      '--log-level',
      'error',
      '--log-format',
      'json',
      '--skip-version-check',
      '--shutdown-grace-period',
      '1',
      // OPA's "Security": the token of `Authorization: Bearer` becomes input.identity of data.system.authz.allow.
      '--authentication=token',
      '--authorization=basic',
      join(this.configDir as string, AUTHZ_POLICY_FILE),
    ];
  }

  /** OPA's config: one bundle service pointing at this server, long polled (else polled between min and max delay). */
  private async writeConfig(): Promise<string> {
    const url = new URL(this.options.bundleUrl);
    const slash = url.pathname.lastIndexOf('/');
    const config = {
      services: {
        arbiter: {
          url: `${url.origin}${url.pathname.slice(0, slash)}`,
          credentials: { bearer: { token: `\${${TOKEN_VARIABLE}}` } },
        },
      },
      bundles: {
        [OPA_BUNDLE_NAME]: {
          service: 'arbiter',
          resource: url.pathname.slice(slash + 1),
          // Long polling: this server holds OPA's request until the bundle changes (bundle/route.ts);
          // the delays apply only when it cannot (errors, an older server).
          polling: {
            min_delay_seconds: this.options.pollMinSeconds,
            max_delay_seconds: this.options.pollMaxSeconds,
            long_polling_timeout_seconds: LONG_POLL_SECONDS,
          },
        },
      },
    };
    const dir = await mkdtemp(join(tmpdir(), CONFIG_DIR_PREFIX));
    await writeFile(join(dir, 'config.json'), JSON.stringify(config, null, 2), { mode: 0o600 });
    await writeFile(join(dir, AUTHZ_POLICY_FILE), authzPolicy(this.apiToken), { mode: 0o600 });
    await writeFile(join(dir, OWNER_PID_FILE), String(process.pid));
    return dir;
  }

  private forwardLogs(child: ChildProcess): void {
    for (const stream of [child.stdout, child.stderr]) {
      if (!stream) continue;
      createInterface({ input: stream }).on('line', (line) =>
        this.options.log.warn({ opa: parseLogLine(line) }, 'managed OPA says'),
      );
    }
  }

  private onExit(child: ChildProcess, reason: string, ranForMs: number): void {
    if (this.child !== child) return;
    this.child = null;
    if (this.stopping) return;
    if (ranForMs > STABLE_RUN_MS) this.restarts = 0;
    const delay = Math.min(MAX_RESTART_DELAY_MS, 500 * 2 ** this.restarts);
    this.restarts += 1;
    this.options.log.error(
      { reason, restartInMs: delay },
      'managed OPA stopped unexpectedly; decisions fail closed until it is back',
    );
    this.restartTimer = setTimeout(() => void this.restart(), delay);
    this.restartTimer.unref();
  }

  private async restart(): Promise<void> {
    if (this.stopping) return;
    try {
      await this.spawnAndWait();
    } catch (error) {
      // Another process may have taken the port meanwhile; the next attempt uses a fresh one.
      this.options.log.error({ err: error }, 'managed OPA restart failed');
      // Awaited by no one (a timer's): a port that cannot be had is logged, not an unhandled rejection.
      this.port = await freePort().catch((portError: unknown) => {
        this.options.log.error({ err: portError }, 'managed OPA: no free port for its restart');
        return this.port;
      });
    }
  }

  private async terminate(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const stopped = await Promise.race([exited.then(() => true), sleep(STOP_GRACE_MS).then(() => false)]);
    if (!stopped) {
      child.kill('SIGKILL');
      await exited;
    }
  }
}

/**
 * OPA's system authorization policy: every API call (health included) must bear the token. The
 * file holds only the token's digest, so the token itself is never on disk or on a command line.
 */
function authzPolicy(token: string): string {
  const digest = createHash('sha256').update(token).digest('hex');
  return [
    'package system.authz',
    '',
    'default allow := false',
    '',
    `allow if crypto.sha256(input.identity) == "${digest}"`,
    '',
  ].join('\n');
}

/** Resolves true once GET /health answers 200, false after `timeoutMs` or when the process is gone. */
async function waitForHealth(
  baseUrl: string,
  token: string,
  timeoutMs: number,
  alive: () => boolean,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && alive()) {
    if (await answersHealth(baseUrl, token)) return true;
    await sleep(50);
  }
  return false;
}

/** Whether OPA's GET /health answers 200 within HEALTH_CHECK_TIMEOUT_MS. */
async function answersHealth(baseUrl: string, token: string): Promise<boolean> {
  try {
    const headers = { authorization: `Bearer ${token}` };
    const response = await fetch(`${baseUrl}/health`, {
      headers,
      signal: AbortSignal.timeout(HEALTH_CHECK_TIMEOUT_MS),
    });
    await response.body?.cancel();
    return response.ok;
  } catch {
    // not listening (yet), or not answering
    return false;
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function parseLogLine(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return line;
  }
}

/**
 * A server killed outright (SIGKILL, the OOM killer) cannot stop its OPA: the OPA keeps running
 * and its config folder stays (its scratch folder too: scratch.ts's removeScratchOfEndedProcesses,
 * at the policy engine's start). The next start of a server on this machine finds them by the
 * folders' owner pid: a folder whose owner is dead has its OPA killed (only if that pid is still
 * an OPA run with this very folder's config) and is removed. Folders of live servers (other
 * servers on the machine, or this process's own) are left alone.
 */
export async function cleanUpAfterCrashedOwners(log: Logger): Promise<void> {
  const entries = await readdir(tmpdir()).catch(() => [] as string[]);
  for (const entry of entries.filter((name) => name.startsWith(CONFIG_DIR_PREFIX))) {
    const dir = join(tmpdir(), entry);
    const owner = Number(await readFile(join(dir, OWNER_PID_FILE), 'utf8').catch(() => 'NaN'));
    if (!Number.isInteger(owner) || isAlive(owner)) continue;
    const opa = Number(await readFile(join(dir, OPA_PID_FILE), 'utf8').catch(() => 'NaN'));
    if (Number.isInteger(opa) && isAlive(opa) && (await commandLineOf(opa)).includes(dir)) {
      process.kill(opa, 'SIGKILL');
      log.warn({ pid: opa, ownerPid: owner }, 'killed the OPA of a server that died without stopping it');
    }
    await rm(dir, { recursive: true, force: true });
  }
}

async function commandLineOf(pid: number): Promise<string> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).replaceAll('\0', ' ');
}
