/**
 * Cost curves: how one hot-path request's throughput bends as one dimension of the deployment
 * grows. Each dimension runs two Arbiter servers in this process (SQLite, managed OPA, audit),
 * one seeded small and one large through the Admin API, and measures the same request on both in
 * alternating rounds (the first round starts with the small one, the next with the large one);
 * the load comes from autocannon in a child process (load.ts). The ratio is the median of the
 * rounds' large/small ratios.
 *
 *   bash scripts/run.sh tsx bench/curve.ts
 *   BENCH_SECONDS=5 BENCH_ROUNDS=3 CURVE_DIMENSIONS=policy bash scripts/run.sh tsx bench/curve.ts
 *
 * Dimensions (a table: add a row for each new one):
 * - policy size: client_credentials (client_secret_basic, scope read) with 10 and with 10,000
 *   resource types in `data.oauth.resource_types` (goal, issue 36: ≥ 0.8x).
 *
 * A benchmark, not a test: it exits 0 once every answer was checked, whatever the numbers.
 */
import os from 'node:os';
import { basic, clientCredentials, confidentialClient, FORM, updateOauthData } from '../test/support/oauth.js';
import { startTestServer, type TestServer } from '../test/support/server.js';
import { LoadGenerator, type LoadResult } from './load.js';
import { median } from './stats.js';

const SECONDS = positive('BENCH_SECONDS', 5);
const WARMUP_SECONDS = positive('BENCH_WARMUP_SECONDS', Math.min(2, SECONDS));
const CONNECTIONS = positive('BENCH_CONNECTIONS', 32);
const ROUNDS = positive('BENCH_ROUNDS', 3);

/** The request a prepared server is measured with. */
interface LoadRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
}

interface Dimension {
  name: string;
  /** What the goal says, for the table. */
  goal: number;
  small: { label: string; size: number };
  large: { label: string; size: number };
  /** Seeds `server` at `size` (through the Admin API) and answers the request to measure, checked to succeed. */
  prepare(server: TestServer, size: number): Promise<LoadRequest>;
}

const DIMENSIONS: Dimension[] = [
  {
    name: 'policy size',
    goal: 0.8,
    small: { label: '10 resource types', size: 10 },
    large: { label: '10,000 resource types', size: 10_000 },
    prepare: async (server, size) => {
      await updateOauthData(server, (data: { resource_types: Record<string, unknown> }) => {
        for (let index = 0; index < size; index += 1)
          data.resource_types[`urn:curve:type:${index}`] = { scopes: ['read', `curve-${index}`] };
      });
      const secret = await confidentialClient(server, 'curve-machine', { scopes: ['read'] });
      const form = { grant_type: 'client_credentials', scope: 'read' };
      const answer = await clientCredentials(server, 'curve-machine', secret, { scope: 'read' });
      if (answer.status !== 200) throw new Error(`client_credentials answered ${answer.status}`);
      return {
        path: '/token',
        headers: { ...FORM, authorization: basic('curve-machine', secret) },
        body: new URLSearchParams(form).toString(),
      };
    },
  },
];

interface Row {
  dimension: string;
  goal: number;
  small: string;
  large: string;
  rounds: { small: LoadResult; large: LoadResult; ratio: number }[];
  ratio: number;
}

async function main(): Promise<void> {
  const only = process.env.CURVE_DIMENSIONS;
  const chosen = DIMENSIONS.filter(
    (dimension) => !only || only.split(',').some((part) => dimension.name.includes(part.trim())),
  );
  const load = new LoadGenerator();
  const rows: Row[] = [];
  try {
    for (const dimension of chosen) rows.push(await measureDimension(load, dimension));
  } finally {
    load.close();
  }
  console.log(table(rows));
}

async function measureDimension(load: LoadGenerator, dimension: Dimension): Promise<Row> {
  const servers: TestServer[] = [];
  try {
    const small = await startTestServer();
    servers.push(small);
    const large = await startTestServer();
    servers.push(large);
    await Promise.all([small.waitUntilReady(), large.waitUntilReady()]);
    const requests = {
      small: await dimension.prepare(small, dimension.small.size),
      large: await dimension.prepare(large, dimension.large.size),
    };
    const run = async (server: TestServer, request: LoadRequest) =>
      (
        await load.run({
          url: `${server.url}${request.path}`,
          method: 'POST',
          headers: request.headers,
          body: request.body,
          connections: CONNECTIONS,
          warmupSeconds: WARMUP_SECONDS,
          seconds: SECONDS,
        })
      ).measured;
    const rounds: Row['rounds'] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      // Alternate which size goes first, so that neither always runs on the warmer machine.
      const measured: Partial<Record<'small' | 'large', LoadResult>> = {};
      for (const size of round % 2 === 0 ? (['small', 'large'] as const) : (['large', 'small'] as const)) {
        measured[size] = await run(size === 'small' ? small : large, requests[size]);
        const result = measured[size];
        console.error(
          `  ${dimension.name} · ${dimension[size].label} · round ${round + 1}: ${result.rps.toFixed(0)} req/s, p99 ${result.p99} ms, ${result.errors + result.non2xx} errors (load ${os.loadavg()[0]!.toFixed(1)})`,
        );
      }
      rounds.push({ small: measured.small!, large: measured.large!, ratio: measured.large!.rps / measured.small!.rps });
    }
    return {
      dimension: dimension.name,
      goal: dimension.goal,
      small: dimension.small.label,
      large: dimension.large.label,
      rounds,
      ratio: median(rounds.map((round) => round.ratio)),
    };
  } finally {
    for (const server of servers) await server.close().catch(() => undefined);
  }
}

function table(rows: Row[]): string {
  const lines = [
    `\n${SECONDS} s per size and round after ${WARMUP_SECONDS} s of warm-up, ${ROUNDS} rounds, ${CONNECTIONS} connections, loopback, ${os.cpus().length} CPUs, Node ${process.version}, load average ${os
      .loadavg()
      .map((value) => value.toFixed(1))
      .join(' ')}`,
    'dimension          small                    req/s  p99 ms   large                    req/s  p99 ms   ratio (rounds)        goal',
  ];
  for (const row of rows) {
    const averaged = (size: 'small' | 'large', pick: (result: LoadResult) => number) =>
      median(row.rounds.map((round) => pick(round[size])));
    lines.push(
      [
        row.dimension.padEnd(18),
        row.small.padEnd(22),
        averaged('small', (result) => result.rps)
          .toFixed(0)
          .padStart(7),
        averaged('small', (result) => result.p99)
          .toFixed(0)
          .padStart(7),
        ' ',
        row.large.padEnd(22),
        averaged('large', (result) => result.rps)
          .toFixed(0)
          .padStart(7),
        averaged('large', (result) => result.p99)
          .toFixed(0)
          .padStart(7),
        ' ',
        `${row.ratio.toFixed(2)}x (${row.rounds.map((round) => round.ratio.toFixed(2)).join(' ')})`.padEnd(22),
        `≥ ${row.goal}x ${row.ratio >= row.goal ? 'met' : 'MISSED'}`,
      ].join(' '),
    );
  }
  return lines.join('\n');
}

function positive(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  return value;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
