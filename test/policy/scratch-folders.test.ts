import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'chai';
import { projectPath } from '../../src/config/index.js';
import { resolveOpaBinary, runOpa } from '../../src/policy/opa/binary.js';
import { capabilitiesFileOf } from '../../src/policy/opa/sandbox.js';
import { inScratchDirectory, removeScratchOfEndedProcesses } from '../../src/policy/opa/scratch.js';
import { freePort } from '../support/server.js';
import { startServerProcess } from '../support/server-process.js';

/** A pid that has just ended (a process started and waited for). */
function endedPid(): number {
  return Number(spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' }).stdout.trim());
}

/**
 * What a process leaves of a check it was killed in the middle of: its candidate bundle in a scratch
 * directory (src/policy/opa/binary.ts), which holds policy code and data, or a replay's recorded inputs.
 */
describe('Scratch directories of a process killed in the middle of a check (policy/opa/scratch)', function () {
  this.timeout(60_000);
  let temporary: string;
  let given: string | undefined;

  beforeEach(function () {
    given = process.env.TMPDIR;
    temporary = mkdtempSync(join(tmpdir(), 'arbiter-scratch-test-'));
    process.env.TMPDIR = temporary;
  });
  afterEach(function () {
    if (given === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = given;
    rmSync(temporary, { recursive: true, force: true });
  });

  /** A process running `module` (an ES module, from the project, under tsx, with this TMPDIR) once it printed its first line. */
  async function processThatPrints(module: string): Promise<{ child: ChildProcess; printed: string }> {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', module], {
      cwd: projectPath(),
      env: { ...process.env, TMPDIR: temporary },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [printed] = (await once(child.stdout!, 'data')) as [Buffer];
    return { child, printed: printed.toString().trim() };
  }

  it('are removed once their process is gone, with what it was checking; those of live processes stay', async function () {
    // A process that writes a bundle in its scratch directory and is killed before it ends.
    const { child } = await processThatPrints(
      `const { inScratchDirectory } = await import('./src/policy/opa/scratch.ts');
       await inScratchDirectory('arbiter-bundle-check-', async (dir) => {
         (await import('node:fs')).writeFileSync(dir + '/bundle.tar.gz', 'policy code and data');
         console.log('written');
         await new Promise(() => undefined);
       });`,
    );
    child.kill('SIGKILL');
    await once(child, 'exit');
    const left = join(temporary, `arbiter-scratch-${child.pid}`);
    expect(readdirSync(left)).to.have.length(1);

    let ownChecked = false;
    await inScratchDirectory('arbiter-bundle-check-', async (own) => {
      expect(await removeScratchOfEndedProcesses()).to.deep.equal([child.pid]);
      expect(existsSync(left), 'the killed process left it').to.equal(false);
      expect(own.startsWith(join(temporary, `arbiter-scratch-${process.pid}`))).to.equal(true);
      expect(existsSync(own), 'this live process keeps its own').to.equal(true);
      ownChecked = true;
    });
    expect(ownChecked).to.equal(true);
  });

  it("are a process's own: a folder of its name that another user made first (a shared /tmp), or a link, is not used", async function () {
    const named = join(temporary, `arbiter-scratch-${process.pid}`);
    mkdirSync(named, { mode: 0o777 });
    chmodSync(named, 0o777);
    const opa = resolveOpaBinary(null);
    for (const made of [
      await inScratchDirectory('arbiter-bundle-check-', async (dir) => dir),
      await capabilitiesFileOf(opa),
    ]) {
      expect(made.startsWith(`${named}/`), made).to.equal(false);
      const parent = statSync(dirname(made));
      expect(parent.mode & 0o077, `${dirname(made)} is private`).to.equal(0);
      expect(parent.uid).to.equal(process.getuid!());
    }
    rmSync(named, { recursive: true, force: true });
    const elsewhere = mkdtempSync(join(temporary, 'elsewhere-'));
    symlinkSync(elsewhere, named);
    expect(await inScratchDirectory('arbiter-bundle-check-', async (dir) => dir)).not.to.match(
      new RegExp(`^${named}/`),
    );
    expect(readdirSync(elsewhere)).to.deep.equal([]);
  });

  it('hold the capabilities file of a process, which a later start removes once the process is killed', async function () {
    // The file every opa command of the process checks rules with, written once and kept while it runs.
    const { child, printed: file } = await processThatPrints(
      `const { capabilitiesFileOf } = await import('./src/policy/opa/sandbox.ts');
       const { resolveOpaBinary } = await import('./src/policy/opa/binary.ts');
       console.log(await capabilitiesFileOf(resolveOpaBinary(null)));
       setInterval(() => undefined, 60_000);`,
    );
    child.kill('SIGKILL');
    await once(child, 'exit');
    const left = join(temporary, `arbiter-scratch-${child.pid}`);
    expect(file.startsWith(`${left}/arbiter-capabilities-`), file).to.equal(true);
    expect(existsSync(file)).to.equal(true);

    expect(await removeScratchOfEndedProcesses()).to.deep.equal([child.pid]);
    expect(readdirSync(temporary).filter((name) => name.startsWith('arbiter-'))).to.deep.equal([]);
  });

  it('give a process its capabilities file again when it was removed from under it (a temporary-file cleaner)', async function () {
    const opa = resolveOpaBinary(null);
    const first = await capabilitiesFileOf(opa);
    rmSync(dirname(first), { recursive: true, force: true });
    const again = await capabilitiesFileOf(opa);
    expect(existsSync(again), again).to.equal(true);
    expect(JSON.parse(readFileSync(again, 'utf8')))
      .to.have.property('builtins')
      .that.is.an('array').that.is.not.empty;
    // And the check of a rule, which reads it, works (it would stop at the missing file otherwise).
    const rule = join(temporary, 'rule.rego');
    writeFileSync(rule, 'package arbiter.check\n\nallow := true\n');
    const run = await runOpa(opa, ['check', rule]);
    expect(run.exitCode, run.stderr).to.equal(0);
  });

  /** A server process started with `env`, once /livez answers (its policy engine has started), then stopped. */
  async function startAndStop(env: Record<string, string>): Promise<void> {
    const dataDir = mkdtempSync(join(temporary, 'data-'));
    const server = await startServerProcess({
      port: await freePort(),
      dataDir,
      env: { TMPDIR: temporary, ...env },
      started: async (url) => (await fetch(`${url}/livez`).catch(() => null))?.status === 200,
    });
    server.kill('SIGTERM');
    await once(server, 'exit');
  }

  /** A scratch folder left by a process that has ended, with a replay's recorded inputs in it. */
  function leftByAnEndedProcess(): string {
    const folder = join(temporary, `arbiter-scratch-${endedPid()}`);
    mkdirSync(join(folder, 'arbiter-replay-x'), { recursive: true });
    writeFileSync(join(folder, 'arbiter-replay-x', 'inputs.json'), '[{"subject":"recorded"}]');
    return folder;
  }

  it('are removed when a server starts on the machine', async function () {
    const folder = leftByAnEndedProcess();
    await startAndStop({});
    expect(existsSync(folder)).to.equal(false);
  });

  it('are removed when a server with an external OPA (OPA_URL) starts: it checks rules and builds Wasm in scratch folders too', async function () {
    const folder = leftByAnEndedProcess();
    // Nothing listens there: the server starts all the same (its decisions fail closed until OPA answers).
    await startAndStop({ OPA_URL: `http://127.0.0.1:${await freePort()}/` });
    expect(existsSync(folder)).to.equal(false);
  });
});
