import { expect } from 'chai';
import { dataFiles, mergeData, valueAt } from '../../../src/policy/bundle/data-tree.js';
import { dataEntryProblem } from '../../../src/policy/index.js';

describe('unit: policy data entries as one data document and as bundle files (policy/data-tree)', function () {
  it('accepts dotted identifiers with a JSON payload, and says what is wrong otherwise', function () {
    expect(dataEntryProblem('oauth', '{"a":1}')).to.equal(null);
    expect(dataEntryProblem('oauth.resource_types', '[]')).to.equal(null);
    expect(dataEntryProblem('oauth..types', '{}')).to.match(/identifiers separated by dots/);
    expect(dataEntryProblem('1oauth', '{}')).to.match(/identifiers separated by dots/);
    expect(dataEntryProblem('system.x', '{}')).to.match(/reserved by OPA/);
    expect(dataEntryProblem('oauth', '{"a":')).to.match(/^payload is not valid JSON/);
    expect(dataEntryProblem('deep', `${'['.repeat(65)}${']'.repeat(65)}`)).to.match(/deeper than 64 levels/);
    expect(dataEntryProblem('deep', `${'['.repeat(64)}${']'.repeat(64)}`)).to.equal(null);
    expect(dataEntryProblem('__proto__.polluted', '1')).to.match(/must not have __proto__ as a part/);
    expect(dataEntryProblem('oauth.__proto__', '{}')).to.match(/must not have __proto__ as a part/);
    expect(dataEntryProblem('oauth.__proto__x', '{}')).to.equal(null);
  });

  it('never writes into the prototype every object shares, whatever the keys (prototype pollution)', function () {
    // A stored entry the Admin API refuses now (an older release took it): the merge keeps it as data.
    const merged = mergeData([{ dataKey: '__proto__.polluted', value: 'yes' }]);
    expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
    expect(Object.getPrototypeOf(merged)).to.equal(Object.prototype);
  });

  it('keeps a __proto__ key of a payload as data when entries merge, as JSON.parse does, not as a prototype', function () {
    const entries = [
      { dataKey: 'shapes', value: { inner: { x: 0 } } },
      { dataKey: 'shapes.inner', value: JSON.parse('{"__proto__": {"polluted": true}}') as unknown },
    ];
    const merged = mergeData(entries);
    expect(JSON.stringify(merged)).to.equal('{"shapes":{"inner":{"x":0,"__proto__":{"polluted":true}}}}');
    expect(Object.getPrototypeOf(valueAt(merged, 'shapes.inner'))).to.equal(Object.prototype);
    expect(JSON.stringify(Object.fromEntries(dataFiles(entries)))).to.equal(
      '{"shapes/data.json":{},"shapes/inner/data.json":{"x":0,"__proto__":{"polluted":true}}}',
    );
  });

  it('merges nested entries object by object, a deeper key winning where both give a value that is not an object', function () {
    const entries = [
      { dataKey: 'oauth.resource_types', value: { doc: { scopes: ['read'] } } },
      {
        dataKey: 'oauth',
        value: { resource_types: { kept: {}, doc: { scopes: ['write'], single_use: true } }, enabled: true },
      },
      { dataKey: 'authzen', value: { roles: [] } },
    ];
    const merged = mergeData(entries);
    expect(merged).to.deep.equal({
      oauth: { resource_types: { kept: {}, doc: { scopes: ['read'], single_use: true } }, enabled: true },
      authzen: { roles: [] },
    });
    expect(valueAt(merged, 'oauth.resource_types.doc.scopes')).to.deep.equal(['read']);
    expect(valueAt(merged, 'oauth.missing')).to.equal(undefined);
    expect(valueAt(merged, 'oauth.enabled.deeper')).to.equal(undefined);
  });

  it('writes one data.json per entry, without the branches a deeper entry owns, so that no two files give the same leaf', function () {
    const files = dataFiles([
      { dataKey: 'oauth', value: { resource_types: { kept: {} }, enabled: true } },
      { dataKey: 'oauth.resource_types', value: { doc: {} } },
    ]);
    expect(Object.fromEntries(files)).to.deep.equal({
      'oauth/data.json': { enabled: true },
      'oauth/resource_types/data.json': { kept: {}, doc: {} },
    });
  });
});
