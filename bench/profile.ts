/**
 * Where Arbiter's time goes in one scenario of the bench: Arbiter in this process, the scenario's
 * load from the bench's load generator (a child process), V8's CPU profiler on this process for
 * the measured window only. Prints the CPU time of each process (this one, the load generator,
 * OPA), the top self-time frames and the self time per module, and writes the .cpuprofile (open
 * it in Chrome DevTools or speedscope).
 *
 *   npx tsx bench/profile.ts                                   client_credentials, client_secret_basic
 *   BENCH_PROFILE_SCENARIO="introspect valid token, Basic caller" BENCH_SECONDS=10 npx tsx bench/profile.ts
 *   BENCH_PROFILE_DIR=/tmp/arbiter-profiles (default)
 *   BENCH_PROFILE_TARGET=library npx tsx bench/profile.ts      the bare oidc-provider (baseline.ts) instead
 *
 * The profile is written; compare two of them per file of code (µs of self time per request) with
 * `python3 bench/cpu-by-file.py <a.cpuprofile> <a requests> <b.cpuprofile> <b requests>`.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session, type Profiler } from 'node:inspector/promises';
import { join } from 'node:path';
import { LoadGenerator } from './load.js';
import { scenarios } from './scenarios.js';
import { loadConfig } from '../src/config/index.js';
import { benchClients, startArbiter, startBaselineTarget } from './servers.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
/** `library`: the bare oidc-provider of bench:peers in this process, to see what Arbiter adds. */
const TARGET = process.env.BENCH_PROFILE_TARGET === 'library' ? 'library' : 'arbiter';
const SCENARIO = process.env.BENCH_PROFILE_SCENARIO ?? 'client_credentials, client_secret_basic';
const DIRECTORY = process.env.BENCH_PROFILE_DIR ?? '/tmp/arbiter-profiles';
/** This checkout's URL, left out of the frames' file names. */
const CHECKOUT = new URL('..', import.meta.url).href;
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

async function main(): Promise<void> {
  const clients = await benchClients();
  const scenario = scenarios(clients).find((candidate) => candidate.name === SCENARIO);
  if (!scenario) throw new Error(`no scenario named "${SCENARIO}"`);
  const load = new LoadGenerator();
  const arbiter =
    TARGET === 'library' ? await startBaselineTarget(clients, loadConfig({}).ttl) : await startArbiter(clients);
  const session = new Session();
  session.connect();
  try {
    const spec = scenario.request(arbiter);
    if (spec.pool) throw new Error('profiling a pool scenario is not supported here');
    const job = {
      url: `${arbiter.url}${spec.path}`,
      method: 'POST' as const,
      headers: spec.headers,
      body: spec.body,
      assertion: spec.assertion,
      connections: CONNECTIONS,
    };
    await load.run({ ...job, warmupSeconds: 0, seconds: 2 });

    const processes = { [`this process (${TARGET})`]: process.pid, 'load generator': load.pid!, ...opaProcesses() };
    const before = cpuSeconds(processes);
    const threadsBefore = threadCpuSeconds();
    await session.post('Profiler.setSamplingInterval', { interval: 500 });
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    const { measured: result } = await load.run({ ...job, warmupSeconds: 0, seconds: SECONDS });
    const { profile } = await session.post('Profiler.stop');
    const after = cpuSeconds(processes);
    const threadsAfter = threadCpuSeconds();

    mkdirSync(DIRECTORY, { recursive: true });
    const file = join(DIRECTORY, `arbiter-${Date.now()}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    console.log(
      `\n${scenario.name}: ${result.requests} requests, ${result.rps.toFixed(0)} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms, ${result.errors + result.non2xx} errors over ${result.seconds.toFixed(1)} s, ${CONNECTIONS} connections\n`,
    );
    console.log('CPU seconds during the measured window (per 1,000 requests):');
    for (const name of Object.keys(processes)) {
      const used = after[name]! - before[name]!;
      console.log(
        `  ${name.padEnd(28)} ${used.toFixed(2).padStart(7)} s  (${((used / result.requests) * 1000).toFixed(2)} s)`,
      );
    }
    console.log("this process's threads, by name (threads that ended during the window are not counted):");
    for (const [name, seconds] of Object.entries(threadsAfter)) {
      const used = seconds - (threadsBefore[name] ?? 0);
      console.log(
        `  ${name.padEnd(28)} ${used.toFixed(2).padStart(7)} s  (${((used / result.requests) * 1000).toFixed(2)} s)`,
      );
    }
    summarize(profile);
    console.log(`\nprofile: ${file}`);
  } finally {
    session.disconnect();
    load.close();
    await arbiter.close();
  }
}

/** Managed OPA servers started by this process. */
function opaProcesses(): Record<string, number> {
  const found: Record<string, number> = {};
  for (const line of execFileSync('ps', ['-eo', 'pid=,ppid=,args=']).toString().split('\n')) {
    const [pid, ppid, ...args] = line.trim().split(/\s+/);
    if (Number(ppid) === process.pid && args.join(' ').includes('opa run')) found[`OPA (pid ${pid})`] = Number(pid);
  }
  return found;
}

/** User + system CPU seconds of each process, from /proc. */
function cpuSeconds(processes: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(processes).map(([name, pid]) => [name, statSeconds(`/proc/${pid}/stat`)]));
}

/**
 * This process's CPU seconds per thread name (MainThread; WorkerThread: the decision threads;
 * libuv-worker: BCrypt and other pool work; V8Worker: mostly the garbage collector's helpers).
 */
function threadCpuSeconds(): Record<string, number> {
  const byName: Record<string, number> = {};
  for (const task of readdirSync('/proc/self/task')) {
    try {
      const name = readFileSync(`/proc/self/task/${task}/comm`, 'utf8').trim();
      byName[name] = (byName[name] ?? 0) + statSeconds(`/proc/self/task/${task}/stat`);
    } catch {
      // The thread ended meanwhile.
    }
  }
  return byName;
}

function statSeconds(file: string): number {
  const fields = readFileSync(file, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  // After "(comm) ": state is field 3, utime 14 and stime 15 (1-based) → indices 11 and 12 here.
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

function summarize(profile: Profiler.Profile): void {
  const byNode = new Map<number, Profiler.ProfileNode>(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  const deltas = profile.timeDeltas ?? [];
  (profile.samples ?? []).forEach((id, index) => self.set(id, (self.get(id) ?? 0) + (deltas[index + 1] ?? 0)));
  const total = [...self.values()].reduce((sum, value) => sum + value, 0);
  const frames = new Map<string, number>();
  const modules = new Map<string, number>();
  for (const [id, micros] of self) {
    const { functionName, url, lineNumber } = byNode.get(id)!.callFrame;
    const where = url ? `${shortUrl(url)}:${lineNumber + 1}` : '';
    const frame = `${functionName || '(anonymous)'} ${where}`.trim();
    frames.set(frame, (frames.get(frame) ?? 0) + micros);
    modules.set(moduleOf(url, functionName), (modules.get(moduleOf(url, functionName)) ?? 0) + micros);
  }
  const top = (entries: Map<string, number>, count: number) =>
    [...entries]
      .sort((a, b) => b[1] - a[1])
      .slice(0, count)
      .map(
        ([name, micros]) =>
          `  ${((micros / total) * 100).toFixed(1).padStart(5)}%  ${(micros / 1000).toFixed(0).padStart(6)} ms  ${name}`,
      );
  console.log(`\ntop self time (of ${(total / 1e6).toFixed(1)} s sampled on the main thread):`);
  console.log(top(frames, 30).join('\n'));
  console.log('\nself time by module:');
  console.log(top(modules, 20).join('\n'));
}

function shortUrl(url: string): string {
  return url
    .replace(CHECKOUT, '')
    .replace(/^file:\/\//, '')
    .replace(/^.*\/node_modules\//, '~/');
}

function moduleOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return url;
  const dependency = /\/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dependency) return dependency[1]!;
  const local = /^((?:src|adapters|test|bench)\/[^/]+)/.exec(url.replace(CHECKOUT, ''));
  return local ? local[1]! : shortUrl(url);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
