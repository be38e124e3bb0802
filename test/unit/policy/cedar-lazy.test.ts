import { expect } from 'chai';
import { inFreshProcess } from '../../support/unit.js';

describe('unit: Cedar loaded at its first use (policy/cedar/wasm.ts)', function () {
  this.timeout(30_000);

  it('is not loaded by a driver whose policy has no Cedar rule, and is by the first one', function () {
    const seen = inFreshProcess<boolean[]>(`
      const { CedarDriver } = await import('./src/policy/cedar/driver.ts');
      const snapshot = (rules) => ({ revision: String(rules.length), rules, data: [], mergedData: {}, skipped: [] });
      const driver = new CedarDriver();
      const seen = [loaded('cedar_wasm')];
      driver.policyTexts(snapshot([]), []);
      seen.push(loaded('cedar_wasm'));
      driver.policyTexts(snapshot([{ kind: 'cedar', path: 'a.cedar', content: 'permit(principal, action, resource);' }]), []);
      seen.push(loaded('cedar_wasm'));
      console.log(JSON.stringify(seen));
    `);
    expect(seen).to.deep.equal([false, false, true]);
  });
});
