import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { projectPath } from '../../../src/config/index.js';
import { OpaLauncher, type LaunchOutcome } from '../../../src/policy/opa/launcher.js';
import { eventually } from '../../support/oauth.js';

const LIMITS = { timeoutMs: 30_000, memoryBytes: 1024 * 1024 * 1024 };

/** The stdout of a run that completed with exit code 0. */
function stdoutOf(outcome: LaunchOutcome): string {
  if (outcome.kind !== 'completed' || outcome.run.exitCode !== 0)
    throw new Error(`run did not complete: ${JSON.stringify(outcome)}`);
  return outcome.run.stdout.trim();
}

/** True while `pid` is a process that has not ended (a zombie has ended). */
function alive(pid: number): boolean {
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  return stat !== '' && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

describe('unit: opa commands start in the launcher process, not the server (policy/opa/launcher)', function () {
  this.timeout(30_000);
  let launcher: OpaLauncher;
  beforeEach(() => {
    launcher = new OpaLauncher();
  });

  it('starts every run in one launcher of its own, with the environment given and nothing else', async () => {
    const first = stdoutOf(await launcher.run('/bin/sh', ['-c', 'echo $PPID'], {}, LIMITS));
    const second = stdoutOf(await launcher.run('/bin/sh', ['-c', 'echo $PPID'], {}, LIMITS));
    expect(Number(first)).to.be.above(0).and.not.equal(process.pid);
    expect(second).to.equal(first);
    const environment = stdoutOf(await launcher.run('/usr/bin/env', [], { ONLY: 'this' }, LIMITS));
    expect(environment).to.equal('ONLY=this');
  });

  it('answers a run that cannot start, and one stopped at its time limit', async () => {
    const missing = await launcher.run('/nonexistent/opa', [], {}, LIMITS);
    expect(missing).to.deep.equal({ kind: 'not-started', reason: 'ENOENT' });
    const slow = await launcher.run('/bin/sleep', ['10'], {}, { ...LIMITS, timeoutMs: 200 });
    expect(slow).to.deep.equal({ kind: 'stopped', limit: 'it ran longer than POLICY_OPA_TIMEOUT_MS (200 ms)' });
  });

  it('ends the runs of a launcher that was lost, and starts a new launcher for the next run', async () => {
    const launcherPid = Number(stdoutOf(await launcher.run('/bin/sh', ['-c', 'echo $PPID'], {}, LIMITS)));
    const running = launcher.run('/bin/sleep', ['20'], {}, LIMITS);
    process.kill(launcherPid, 'SIGKILL');
    const lost = await running;
    expect(lost.kind).to.equal('lost');
    expect(lost)
      .to.have.property('reason')
      .that.matches(/the OPA launcher exited \(SIGKILL\)/);
    const next = Number(stdoutOf(await launcher.run('/bin/sh', ['-c', 'echo $PPID'], {}, LIMITS)));
    expect(next).to.be.above(0).and.not.equal(launcherPid);
  });

  it('ends with the process that started it, and its runs with it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbiter-launcher-'));
    const pidFile = join(dir, 'run.pid');
    const script = `
      import { OpaLauncher } from './src/policy/opa/launcher.ts';
      void new OpaLauncher().run('/bin/sh', ['-c', 'echo $$ > ${pidFile}; exec sleep 30'], {}, ${JSON.stringify(LIMITS)});
    `;
    const starter = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: projectPath(),
      stdio: 'ignore',
    });
    try {
      await eventually(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '', 15_000, 50);
      const runPid = Number(readFileSync(pidFile, 'utf8'));
      expect(alive(runPid)).to.equal(true);
      starter.kill('SIGKILL');
      await eventually(() => !alive(runPid), 10_000, 50);
    } finally {
      starter.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
