import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadConfig, projectPath } from '../../../src/config/index.js';
import { OpaBusyError, OpaLimitError, opaMessage, resolveOpaBinary, runOpa } from '../../../src/policy/opa/binary.js';
import {
  cliEnvironment,
  configureOpaSandbox,
  FORBIDDEN_BUILTINS,
  policySandboxLimits,
} from '../../../src/policy/opa/sandbox.js';

const opa = resolveOpaBinary(null);
/** Evaluates for a long time in little memory (9 million iterations). */
const SLOW_RULE =
  'package p\n\nslow if {\n\tsome i in numbers.range(1, 3000)\n\tsome j in numbers.range(1, 3000)\n\ti * j == -1\n}\n';
/** Allocates about a gigabyte (an array of twenty million numbers). */
const HUNGRY_RULE = 'package p\n\nhungry := count(numbers.range(1, 20000000))\n';

/**
 * The sandbox of every OPA CLI run (src/policy/opa/sandbox.ts, binary.ts) with the real OPA: no
 * builtin that reaches outside, nothing of the server's environment, and the limits of a run.
 */
describe('unit: the sandbox of OPA runs (policy/opa/sandbox)', function () {
  this.timeout(60_000);
  let dir: string;
  const defaults = policySandboxLimits();
  const configured = (env: Record<string, string>) =>
    configureOpaSandbox(loadConfig({ STORE_URL: 'sqlite::memory:', ...env }));

  before(async function () {
    dir = await mkdtemp(join(tmpdir(), 'arbiter-sandbox-test-'));
    await writeFile(join(dir, 'slow.rego'), SLOW_RULE);
    await writeFile(join(dir, 'hungry.rego'), HUNGRY_RULE);
  });
  after(async function () {
    configured({});
    await rm(dir, { recursive: true, force: true });
  });
  afterEach(function () {
    configured({});
  });

  it('gives an OPA run none of the server environment, even without capabilities (the environment alone)', async function () {
    process.env.SANDBOX_TEST_SECRET = 'do-not-leak-0123456789';
    try {
      const { stdout } = await promisify(execFile)(opa, ['eval', '--format', 'json', 'opa.runtime().env'], {
        env: cliEnvironment(),
      });
      const env = JSON.parse(stdout).result[0].expressions[0].value as Record<string, string>;
      expect(Object.keys(env).sort()).to.deep.equal(['GOMAXPROCS', 'GOMEMLIMIT']);
      expect(stdout).not.to.include('do-not-leak');
    } finally {
      delete process.env.SANDBOX_TEST_SECRET;
    }
  });

  for (const builtin of FORBIDDEN_BUILTINS.keys()) {
    it(`refuses ${builtin} in every run, naming it as not allowed (not as an undefined function)`, async function () {
      const run = await runOpa(opa, ['eval', '--format', 'pretty', `x := ${builtin}({})`]);
      expect(run.exitCode).not.to.equal(0);
      const message = opaMessage(run);
      expect(message).to.include(`${builtin} is not allowed in Arbiter policies`);
      expect(message).not.to.include('undefined function');
    });
  }

  it('forbids builtins this OPA has (a misspelt name would forbid nothing)', async function () {
    const { stdout } = await promisify(execFile)(opa, ['capabilities', '--current'], { maxBuffer: 8 << 20 });
    const names = new Set((JSON.parse(stdout).builtins as { name: string }[]).map((builtin) => builtin.name));
    for (const builtin of FORBIDDEN_BUILTINS.keys()) expect(names.has(builtin), builtin).to.equal(true);
  });

  it('compiles the default policy pack with the capabilities (it uses none of the forbidden builtins)', async function () {
    const run = await runOpa(opa, ['check', projectPath('policies')]);
    expect(opaMessage(run)).to.equal('');
    expect(run.exitCode).to.equal(0);
  });

  it('kills a run past POLICY_OPA_TIMEOUT_MS, naming the limit', async function () {
    configured({ POLICY_OPA_TIMEOUT_MS: '1000' });
    const started = Date.now();
    const run = runOpa(opa, ['eval', '-d', join(dir, 'slow.rego'), 'data.p.slow']);
    const error = await run.then(
      () => null,
      (reason: unknown) => reason,
    );
    expect(error).to.be.instanceOf(OpaLimitError);
    expect((error as Error).message).to.include('POLICY_OPA_TIMEOUT_MS (1000 ms)');
    expect(Date.now() - started).to.be.below(10_000);
  });

  it('kills a run whose memory grows past POLICY_OPA_MEMORY_MB, naming the limit', async function () {
    configured({ POLICY_OPA_MEMORY_MB: '96', POLICY_OPA_TIMEOUT_MS: '30000' });
    const error = await runOpa(opa, ['eval', '-d', join(dir, 'hungry.rego'), 'data.p.hungry']).then(
      () => null,
      (reason: unknown) => reason,
    );
    expect(error).to.be.instanceOf(OpaLimitError);
    expect((error as Error).message).to.include('POLICY_OPA_MEMORY_MB (96 MB)');
  });

  it('runs POLICY_OPA_CONCURRENCY at once and answers busy (a 503) to a run that waited POLICY_OPA_QUEUE_MS', async function () {
    configured({ POLICY_OPA_CONCURRENCY: '1', POLICY_OPA_QUEUE_MS: '200', POLICY_OPA_TIMEOUT_MS: '3000' });
    const slow = runOpa(opa, ['eval', '-d', join(dir, 'slow.rego'), 'data.p.slow']).catch((error: unknown) => error);
    const waiting = await runOpa(opa, ['version']).then(
      () => null,
      (reason: unknown) => reason,
    );
    expect(waiting).to.be.instanceOf(OpaBusyError);
    expect(waiting).to.include({ status: 503, error: 'temporarily_unavailable' });
    expect((waiting as Error).message)
      .to.include('busy')
      .and.include('POLICY_OPA_CONCURRENCY');
    expect(await slow).to.be.instanceOf(OpaLimitError);
    // The slot is free again once the slow run has ended.
    expect((await runOpa(opa, ['version'])).exitCode).to.equal(0);
  });

  it('has the configuration defaults as its own', function () {
    expect(defaults).to.deep.equal({
      concurrency: 2,
      queueWaitMs: 5000,
      timeoutMs: 5000,
      memoryBytes: 256 * 1024 * 1024,
      ruleMaxBytes: 256 * 1024,
      bundleMaxBytes: 4 * 1024 * 1024,
      decisionBudgetMs: 2000,
    });
    configured({});
    expect(policySandboxLimits()).to.deep.equal(defaults);
  });
});
