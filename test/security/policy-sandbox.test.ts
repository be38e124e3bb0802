import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clientCredentials, confidentialClient, eventually, policyInForce } from '../support/oauth.js';
import { ADMIN_KEY, inTenant, readyServer, type TestServer } from '../support/server.js';
import { POLICY_RULES, type PolicyRuleDoc } from '../../src/policy/index.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';

const SECRETS = {
  SERVICE_SECRETS_KEY: 'c2FuZGJveC1zZWNyZXRzLWtleS0wMTIzNDU2Nzg5YWI',
  METRICS_TOKEN: 'sandbox-metrics-token-0123456789',
  POLICY_BUNDLE_TOKEN: 'sandbox-bundle-token-0123456789',
};
/** Small limits, so that a costly rule reaches them quickly (the default pack needs about 50 MB and a fraction of a second). */
const LIMITS = {
  POLICY_OPA_CONCURRENCY: '1',
  POLICY_OPA_QUEUE_MS: '1500',
  POLICY_OPA_TIMEOUT_MS: '6000',
  POLICY_OPA_MEMORY_MB: '96',
  POLICY_RULE_MAX_BYTES: '65536',
  POLICY_BUNDLE_MAX_BYTES: '600000',
  // OPA serving an older revision than the store's is reported within seconds (test f).
  POLICY_LAG_BOUND_SECONDS: '2',
};

const TOKEN_RULE = 'arbiter/token/token.rego';
/** The token decision, refusing with `description` (a Rego expression) as its error_description. */
const tokenRule = (description: string, body = 'true') =>
  `package arbiter.token\n\ndecision := {"allow": false, "error": "access_denied", "error_description": ${description}} if {\n\t${body}\n}\n`;
/** The attacker probe's rule (issue 33): the server's environment in a refusal's description. */
const LEAK_ENV = tokenRule('sprintf("%v", [opa.runtime().env])');
/** Evaluates for a long time in little memory (9 million iterations). */
const SLOW = tokenRule('"slow"', 'some i in numbers.range(1, 3000)\n\tsome j in numbers.range(1, 3000)\n\ti * j == -1');
/** Allocates about a gigabyte (an array of twenty million numbers). */
const HUNGRY = tokenRule('"hungry"', 'count(numbers.range(1, 20000000)) > 0');

const rego = (path: string, content: string, extra: Record<string, unknown> = {}) => ({
  version: null,
  kind: 'rego',
  path,
  content,
  ...extra,
});

/** The PIDs of the managed OPAs this test process started (their parent is this process). */
function managedOpaPids(): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const parent = Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
        const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return parent === process.pid && command.includes('run') && command.includes('--server');
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

/**
 * Policy code is an attack path (issue 33, items 1 and 4): any Admin key could run its own Rego
 * on the server, read the server's environment through `opa.runtime()` and post it out with
 * `http.send`, and four large rules ran four unbounded `opa eval`s. Every OPA process now runs
 * in a sandbox (src/policy/opa/sandbox.ts): a rule using a builtin that reaches outside is
 * refused at write, OPA sees none of the server's variables, and a run is bounded in time,
 * memory and number. Real HTTP, real OPA, a real store.
 */
describe('Policy code runs sandboxed (issue 33: items 1 and 4)', function () {
  this.timeout(120_000);
  let server: TestServer;
  let listener: Server;
  let listenerUrl: string;
  const received: string[] = [];
  const logLines: string[] = [];

  before(async function () {
    // A server of its own: its secrets and small limits are this file's subject.
    server = await readyServer(
      { ...SECRETS, ...LIMITS, LOG_LEVEL: 'warn' },
      { logStream: { write: (line: string) => void logLines.push(line) } },
    );
    listener = createServer((request, response) => {
      received.push(`${request.method} ${request.url}`);
      response.end('{}');
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    listenerUrl = `http://127.0.0.1:${(listener.address() as AddressInfo).port}/`;
  });
  after(async function () {
    listener?.close();
    await server?.close();
  });

  /** No secret of the server in a response body. */
  function expectNoSecret(body: unknown): void {
    const text = JSON.stringify(body);
    for (const secret of [...Object.values(SECRETS), ADMIN_KEY, server.config.storeUrl])
      expect(text).not.to.include(secret);
  }

  it('(a) refuses a rule using opa.runtime() with a 400 naming it, at create and validate, shared, tenant and shadow', async function () {
    const probe = rego(
      'arbiter/sandbox_probe/probe.rego',
      'package arbiter.sandbox_probe\n\nleak := opa.runtime().env\n',
    );
    const writes: [TestServer, string, unknown][] = [
      [server, '/policy-rules', probe],
      [server, '/policy-rules/validate', probe],
      [server, '/policy-rules', rego(TOKEN_RULE, LEAK_ENV, { mode: 'shadow' })],
      [server, '/policy-rules/validate', rego(TOKEN_RULE, LEAK_ENV)],
      [inTenant(server, 'sandbox-tenant'), '/policy-rules', probe],
    ];
    for (const [target, path, body] of writes) {
      const answer = await target.admin('POST', path, body);
      expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).to.equal(400);
      expect(answer.body.error).to.equal('invalid_request');
      expect(answer.body.error_description).to.include('opa.runtime is not allowed in Arbiter policies');
      expectNoSecret(answer.body);
    }
    expect((await server.admin('GET', '/policy-rules?q=sandbox_probe')).body).to.satisfy(
      (list: any) => !JSON.stringify(list).includes('sandbox_probe/probe.rego'),
    );
  });

  it('(b) refuses a rule using http.send with a 400 naming it, and nothing reaches the listener', async function () {
    const sendOut = tokenRule(
      `sprintf("%v", [http.send({"method": "post", "url": "${listenerUrl}", "body": {}}).status_code])`,
    );
    for (const path of ['/policy-rules/validate', '/policy-rules']) {
      const answer = await server.admin('POST', path, rego(TOKEN_RULE, sendOut));
      expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
      expect(answer.body.error_description).to.include('http.send is not allowed in Arbiter policies');
    }
    // Every OPA run of these checks has ended with its answer: a request it sent would be here already.
    expect(received).to.deep.equal([]);
  });

  it('(c) refuses a candidate reading the environment at /policy-impact with a 400, and no secret in the answer', async function () {
    const answer = await server.admin('POST', '/policy-impact', {
      changes: [{ collection: 'policy-rules', op: 'replace', record: rego(TOKEN_RULE, LEAK_ENV) }],
    });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
    expect(answer.body.error_description).to.include('opa.runtime is not allowed in Arbiter policies');
    expectNoSecret(answer.body);
  });

  it('(g) refuses a schema annotation referring outside the rule (a file of the host), in any spelling, before OPA reads it', async function () {
    const annotated = (schema: string) =>
      rego(
        'arbiter/sandbox_probe/schema.rego',
        `package arbiter.sandbox_probe\n\n# METADATA\n# schemas:\n${schema}\nx := input.foo\n`,
      );
    for (const schema of [
      '#   - input: {"$ref": "file:///etc/passwd"}',
      '#   - input: {"\\u0024ref": "file:///proc/self/environ"}',
      '#   - input:\n#       $ref: file:///etc/hostname',
      '#   - input: {"$ref": "http://169.254.169.254/latest"}',
      '#   - input: {"$id": "file:///etc/", "$ref": "#/x"}',
    ]) {
      for (const path of ['/policy-rules/validate', '/policy-rules']) {
        const answer = await server.admin('POST', path, annotated(schema));
        expect(answer.status, `${path} ${schema}: ${JSON.stringify(answer.body)}`).to.equal(400);
        expect(answer.body.error_description).to.include('a schema annotation may refer only within itself');
        expect(answer.body.error_description).not.to.match(/invalid character|no such file|root:/);
      }
    }
    const local = annotated(
      '#   - input: {"type": "object", "properties": {"foo": {"$ref": "#/definitions/s"}}, "definitions": {"s": {"type": "string"}}}',
    );
    const checked = await server.admin('POST', '/policy-rules/validate', local);
    expect(checked.status, `a reference within the schema: ${JSON.stringify(checked.body)}`).to.equal(200);
  });

  it("gives the managed OPA none of the server's environment: only the bundle token its config needs", function () {
    const pids = managedOpaPids();
    expect(pids).to.not.be.empty;
    for (const pid of pids) {
      const variables = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
      expect(variables.map((variable) => variable.split('=')[0])).to.deep.equal(['ARBITER_POLICY_BUNDLE_TOKEN']);
    }
  });

  it('(d) stops a check past the memory limit with a 400 naming POLICY_OPA_MEMORY_MB', async function () {
    const answer = await server.admin('POST', '/policy-rules/validate', rego(TOKEN_RULE, HUNGRY));
    expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
    expect(answer.body.error_description).to.include('POLICY_OPA_MEMORY_MB (96 MB)');
  });

  it('(d) stops a check past the time limit with a 400 naming POLICY_OPA_TIMEOUT_MS, and answers 503 "busy" to checks beyond the concurrency cap', async function () {
    const answers = await Promise.all(
      [1, 2, 3].map(() => server.admin('POST', '/policy-rules/validate', rego(TOKEN_RULE, SLOW))),
    );
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses, JSON.stringify(answers.map((answer) => answer.body)))
      .to.include(400)
      .and.include(503);
    for (const answer of answers) {
      if (answer.status === 400) expect(answer.body.error_description).to.include('POLICY_OPA_TIMEOUT_MS (6000 ms)');
      else {
        expect(answer.status).to.equal(503);
        expect(answer.body.error).to.equal('temporarily_unavailable');
        expect(answer.body.error_description).to.include('busy, retry').and.include('POLICY_OPA_CONCURRENCY');
      }
    }
    // The server still checks a good rule afterwards: the slots were given back.
    const pack = readFileSync(new URL('../../policies/arbiter/token/token.rego', import.meta.url), 'utf8');
    const good = await server.admin('POST', '/policy-rules/validate', rego(TOKEN_RULE, pack));
    expect(good.status, JSON.stringify(good.body)).to.equal(200);
  });

  it('(e) refuses a rule (Rego or Cedar) over POLICY_RULE_MAX_BYTES with a 400 naming the limit, unread', async function () {
    const padding = `# ${'x'.repeat(70_000)}\n`;
    const rules = [
      rego(TOKEN_RULE, `${padding}package arbiter.token\n`),
      { version: null, kind: 'cedar', path: 'arbiter/big.cedar', content: `// ${'x'.repeat(70_000)}\n` },
    ];
    for (const rule of rules) {
      const started = Date.now();
      const answer = await server.admin('POST', '/policy-rules/validate', rule);
      expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
      expect(answer.body.error_description).to.include('POLICY_RULE_MAX_BYTES').and.include('65536 bytes');
      expect(answer.body.field).to.equal('content');
      expect(Date.now() - started).to.be.below(5_000);
    }
  });

  it('(e) refuses a write that would make the bundle bigger than POLICY_BUNDLE_MAX_BYTES with a 400 naming the limit', async function () {
    const payload = JSON.stringify({ filler: 'x'.repeat(600_000) });
    const answer = await server.admin('POST', '/policy-data/validate', {
      version: null,
      dataKey: 'sandbox.filler',
      payload,
    });
    expect(answer.status, JSON.stringify(answer.body).slice(0, 500)).to.equal(400);
    expect(answer.body.error_description).to.include('POLICY_BUNDLE_MAX_BYTES').and.include('600000 bytes');
  });

  it('(f) does not give OPA a bundle whose stored rule (from before the sandbox) uses a forbidden builtin: OPA keeps its revision, the log names the rule', async function () {
    const secret = await confidentialClient(server, 'sandbox-client');
    expect((await clientCredentials(server, 'sandbox-client', secret)).status).to.equal(200);
    await policyInForce(server);
    const health = async () => {
      const response = await server.request('/healthz');
      return { status: response.status, body: (await response.json()) as any };
    };
    const served = (await health()).body.policyRevision.opa as string;
    // Written behind the Admin API, as a rule stored before this change was.
    const rules = server.store.collection<PolicyRuleDoc>(POLICY_RULES, DEFAULT_TENANT);
    const stored = (await rules.findOne({ path: TOKEN_RULE, tenantId: null }))!;
    const planted = tokenRule(`sprintf("%v", [http.send({"method": "get", "url": "${listenerUrl}"}).status_code])`);
    await rules.upsert({ ...stored, content: planted, updatedAt: new Date().toISOString() });
    try {
      const bundle = await server.request('/policy/bundle.tar.gz', {
        headers: { authorization: `Bearer ${SECRETS.POLICY_BUNDLE_TOKEN}` },
      });
      expect(bundle.status).to.equal(503);
      await eventually(
        async () =>
          logLines.some(
            (line) => line.includes('arbiter/token/token.rego') && line.includes('http.send is not allowed'),
          ),
        10_000,
      );
      // OPA still decides with the revision it had: the token is granted, and nothing was sent out.
      expect((await clientCredentials(server, 'sandbox-client', secret)).status).to.equal(200);
      expect(received).to.deep.equal([]);
      await eventually(async () => (await health()).status === 503, 15_000);
      const { body } = await health();
      expect(body.policy).to.include('older revision');
      expect(body.policyRevision.opa).to.equal(served);
    } finally {
      await rules.upsert({ ...stored, updatedAt: new Date().toISOString() });
    }
    await policyInForce(server);
    expect(received).to.deep.equal([]);
  });
});
