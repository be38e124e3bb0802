import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectPath } from '../../src/config/index.js';

/**
 * scripts/setup.sh (run by `npm start` and `npm test`) decides whether OPA is installed: not when
 * OPA_URL names an external OPA, so such a machine needs no Go. Run in a copy of the scripts
 * folder whose runtime.sh and install-opa.sh are stand-ins that only say they ran.
 */
describe('scripts/setup.sh', function () {
  let root: string;

  before(function () {
    root = mkdtempSync(join(tmpdir(), 'arbiter-setup-'));
    mkdirSync(join(root, 'scripts'));
    copyFileSync(projectPath('scripts', 'setup.sh'), join(root, 'scripts', 'setup.sh'));
    writeFileSync(join(root, 'scripts', 'runtime.sh'), ':\n');
    writeFileSync(join(root, 'scripts', 'install-opa.sh'), 'touch "$(dirname "$0")/../opa-installed"\n');
  });

  after(function () {
    rmSync(root, { recursive: true, force: true });
  });

  function setup(env: Record<string, string>): { installed: boolean; stderr: string } {
    rmSync(join(root, 'opa-installed'), { force: true });
    const { OPA_URL: _unset, ...inherited } = process.env;
    const run = spawnSync('bash', [join(root, 'scripts', 'setup.sh')], {
      env: { ...inherited, ...env },
      encoding: 'utf8',
    });
    expect(run.status, run.stderr).to.equal(0);
    return { installed: existsSync(join(root, 'opa-installed')), stderr: run.stderr };
  }

  it('installs OPA when OPA_URL is unset (the managed OPA)', function () {
    expect(setup({}).installed).to.equal(true);
  });

  it('installs no OPA when OPA_URL names an external one, says so, and does not print the URL', function () {
    const { installed, stderr } = setup({ OPA_URL: 'http://user:secret@opa.example:8181' });
    expect(installed).to.equal(false);
    expect(stderr).to.match(/OPA_URL is set: not installing OPA/);
    expect(stderr).to.not.include('secret');
    expect(existsSync(join(root, 'data')), 'the data folder is made either way').to.equal(true);
  });
});
