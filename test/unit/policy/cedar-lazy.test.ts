import { execFileSync } from 'node:child_process';
import { expect } from 'chai';
import { projectPath } from '../../../src/config/index.js';

/**
 * Whether @cedar-policy/cedar-wasm is loaded after `steps` ran in a fresh process (this process
 * may have loaded it already): the script prints it after each step.
 */
function cedarLoadedAfter(steps: string): boolean[] {
  const script = `
    import { createRequire } from 'node:module';
    import { CedarDriver } from './src/policy/cedar/driver.ts';
    const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes('cedar_wasm'));
    const snapshot = (rules) => ({ revision: String(rules.length), rules, data: [], mergedData: {}, skipped: [] });
    const driver = new CedarDriver();
    const seen = [loaded()];
    ${steps}
    console.log(JSON.stringify(seen));
  `;
  const output = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: projectPath(),
    encoding: 'utf8',
  });
  return JSON.parse(output.trim().split('\n').at(-1)!) as boolean[];
}

describe('unit: Cedar loaded at its first use (policy/cedar/wasm.ts)', function () {
  this.timeout(30_000);

  it('is not loaded by a driver whose policy has no Cedar rule, and is by the first one', function () {
    const seen = cedarLoadedAfter(`
      driver.policyTexts(snapshot([]), []);
      seen.push(loaded());
      driver.policyTexts(snapshot([{ kind: 'cedar', path: 'a.cedar', content: 'permit(principal, action, resource);' }]), []);
      seen.push(loaded());
    `);
    expect(seen).to.deep.equal([false, false, true]);
  });
});
