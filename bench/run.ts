/**
 * Load on loopback against a real Arbiter (SQLite store, managed OPA), reported as ratios to a
 * baseline measured in the same run: the JWK Set, which touches neither store nor policy.
 *
 *   npm run bench                 5 s per scenario, 10 connections
 *   BENCH_SECONDS=10 npm run bench
 *
 * Every scenario is bounded in time and talks only to 127.0.0.1.
 */
import autocannon from 'autocannon';
import bcrypt from 'bcryptjs';
import { startTestServer } from '../test/support/server.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

interface Scenario {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

async function main(): Promise<void> {
  const server = await startTestServer();
  try {
    await server.waitUntilReady();
    const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
    await server.admin('POST', '/clients', { clientId: 'bench', clientType: 'confidential', clientSecret: bcrypt.hashSync('bench-secret', 4), scopes: ['read', 'introspection'] });
    const issue = await server.request('/token', { method: 'POST', headers: { ...FORM, authorization: basic('bench', 'bench-secret') }, body: 'grant_type=client_credentials&scope=read introspection' });
    const { access_token: token } = (await issue.json()) as { access_token: string };

    const scenarios: Scenario[] = [
      { name: 'baseline: GET /.well-known/jwks.json', method: 'GET', path: '/.well-known/jwks.json' },
      { name: 'GET /.well-known/openid-configuration', method: 'GET', path: '/.well-known/openid-configuration' },
      { name: 'POST /token client_credentials (bcrypt cost 4)', method: 'POST', path: '/token', headers: { ...FORM, authorization: basic('bench', 'bench-secret') }, body: 'grant_type=client_credentials&scope=read' },
      { name: 'POST /introspect (Bearer caller)', method: 'POST', path: '/introspect', headers: { ...FORM, authorization: `Bearer ${token}` }, body: `token=${token}` },
    ];
    const results: { name: string; rps: number; p99: number; errors: number }[] = [];
    for (const scenario of scenarios) {
      const result = await autocannon({ url: `${server.url}${scenario.path}`, method: scenario.method, headers: scenario.headers, body: scenario.body, connections: CONNECTIONS, duration: SECONDS });
      results.push({ name: scenario.name, rps: result.requests.average, p99: result.latency.p99, errors: result.errors + result.non2xx });
    }
    const baseline = results[0].rps;
    console.log(`\n${SECONDS}s per scenario, ${CONNECTIONS} connections, ratios against the baseline of this run\n`);
    console.log(['scenario'.padEnd(52), 'req/s'.padStart(9), 'ratio'.padStart(7), 'p99 ms'.padStart(8), 'non-2xx'.padStart(8)].join(' '));
    for (const { name, rps, p99, errors } of results) {
      console.log([name.padEnd(52), rps.toFixed(0).padStart(9), (rps / baseline).toFixed(2).padStart(7), String(p99).padStart(8), String(errors).padStart(8)].join(' '));
    }
  } finally {
    await server.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
