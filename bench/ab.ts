/**
 * This checkout against another one (an earlier commit in a worktree), on the two hot paths, in
 * one run: "is main as fast as it was?" without comparing figures taken at different times.
 *
 *   git worktree add /tmp/before <commit> && ln -s "$PWD/node_modules" "$PWD/.bin" /tmp/before/
 *   BENCH_AB_OTHER=/tmp/before npm run bench:ab
 *
 * Both are started as `npm start` runs them (src/main.ts, SQLite, managed OPA, WORKERS=1 unless
 * BENCH_AB_WORKERS says otherwise), each with the same confidential client (BCrypt secret) and an
 * introspection-entitled resource server. Each round measures both, one after the other in an
 * order that alternates, and takes the ratio this/other within the round (under about the same
 * outside load); the result is the median over the rounds. The other checkout is used as it is:
 * its node_modules and .bin may be links to this one's when the dependencies are a superset.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import bcrypt from 'bcryptjs';
import { ADMIN_KEY, freePort, testEnvironment } from '../test/support/server.js';
import { basic, FORM } from '../test/support/oauth.js';
import { LoadGenerator } from './load.js';
import { BCRYPT_COST } from './servers.js';
import { median, writeResults } from './stats.js';

const OTHER = process.env.BENCH_AB_OTHER;
const ROUNDS = positive('BENCH_ROUNDS', 6);
const SECONDS = positive('BENCH_SECONDS', 5);
const CONNECTIONS = positive('BENCH_CONNECTIONS', 32);
const WORKERS = positive('BENCH_AB_WORKERS', 1);
const MACHINE = { id: 'ab-machine', secret: 'ab-machine-secret-0123456789' };
const RESOURCE_SERVER = { id: 'ab-resource-server', secret: 'ab-resource-server-secret-0123' };

interface Side {
  label: string;
  url: string;
  token: string;
  close(): void;
}

function positive(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
  return value;
}

async function start(label: string, root: string): Promise<Side> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'arbiter-ab-'));
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...testEnvironment(port, dataDir), WORKERS: String(WORKERS) },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  const close = () => {
    child.kill('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    await until(async () => (await fetch(`${url}/readyz`).catch(() => null))?.ok === true, child);
    await createClient(url, {
      clientId: MACHINE.id,
      clientType: 'confidential',
      clientSecret: bcrypt.hashSync(MACHINE.secret, BCRYPT_COST),
      scopes: ['read'],
    });
    await createClient(url, {
      clientId: RESOURCE_SERVER.id,
      clientType: 'confidential',
      clientSecret: bcrypt.hashSync(RESOURCE_SERVER.secret, BCRYPT_COST),
      grantedResources: [{ type: 'urn:as:introspect', scopes: ['introspection'] }],
    });
    const token = await until(async () => {
      const answer = await fetch(`${url}/token`, {
        method: 'POST',
        headers: { ...FORM, Authorization: basic(MACHINE.id, MACHINE.secret) },
        body: 'grant_type=client_credentials&scope=read',
      });
      return answer.ok ? ((await answer.json()) as { access_token: string }).access_token : null;
    }, child);
    return { label, url, token, close };
  } catch (error) {
    close();
    throw error;
  }
}

async function createClient(url: string, record: Record<string, unknown>): Promise<void> {
  const answer = await fetch(`${url}/admin/api/clients`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Admin-API-Key': ADMIN_KEY },
    body: JSON.stringify(record),
  });
  if (answer.status !== 201) throw new Error(`client not created at ${url}: ${answer.status} ${await answer.text()}`);
}

/** Polls `probe` until it gives a value (the policy bundle may still be loading), for up to 60 s. */
async function until<T>(probe: () => Promise<T | null | false>, child: ChildProcess): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== false) return value;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error('the server did not start');
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const SCENARIOS = {
  'client_credentials, client_secret_basic': (side: Side) => ({
    url: `${side.url}/token`,
    headers: { ...FORM, Authorization: basic(MACHINE.id, MACHINE.secret) },
    body: 'grant_type=client_credentials&scope=read',
  }),
  'introspection of a valid token': (side: Side) => ({
    url: `${side.url}/introspect`,
    headers: { ...FORM, Authorization: basic(RESOURCE_SERVER.id, RESOURCE_SERVER.secret) },
    body: `token=${side.token}`,
  }),
};

async function main(): Promise<void> {
  const startedAt = new Date();
  if (!OTHER) throw new Error('BENCH_AB_OTHER must name the other checkout (a directory)');
  const sides = [await start('this', process.cwd()), await start('other', resolve(OTHER))];
  const load = new LoadGenerator();
  const results: Record<string, { ratios: number[]; rps: Record<string, number[]> }> = {};
  try {
    for (const [scenario, requestOf] of Object.entries(SCENARIOS)) {
      const result = (results[scenario] = {
        ratios: [] as number[],
        rps: { this: [], other: [] } as Record<string, number[]>,
      });
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? sides : [...sides].reverse();
        const rps: Record<string, number> = {};
        for (const side of order) {
          const run = await load.run({
            ...requestOf(side),
            method: 'POST',
            connections: CONNECTIONS,
            warmupSeconds: 2,
            seconds: SECONDS,
          });
          if (run.measured.non2xx + run.measured.errors > 0)
            throw new Error(`${scenario} at ${side.label}: ${JSON.stringify(run.measured.statuses)}`);
          rps[side.label] = run.measured.rps;
          result.rps[side.label]!.push(run.measured.rps);
        }
        result.ratios.push(rps.this! / rps.other!);
        console.log(
          `${scenario} · round ${round + 1}: this ${rps.this!.toFixed(0)} req/s, other ${rps.other!.toFixed(0)} req/s, ${(rps.this! / rps.other!).toFixed(3)}x`,
        );
      }
    }
  } finally {
    load.close();
    for (const side of sides) side.close();
  }
  console.log(`\n${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections, WORKERS=${WORKERS}, other = ${OTHER}`);
  for (const [scenario, result] of Object.entries(results))
    console.log(
      `${scenario.padEnd(42)} this ${median(result.rps.this!).toFixed(0)} req/s, other ${median(result.rps.other!).toFixed(0)} req/s, median ratio ${median(result.ratios).toFixed(3)}x (rounds ${result.ratios.map((ratio) => ratio.toFixed(3)).join(', ')})`,
    );
  writeResults('ab', startedAt, {
    other: OTHER,
    rounds: ROUNDS,
    seconds: SECONDS,
    connections: CONNECTIONS,
    workers: WORKERS,
    results,
  });
}

await main();
