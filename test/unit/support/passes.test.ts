import { expect } from 'chai';
import { globSync } from 'node:fs';
import { createRequire } from 'node:module';
import { projectPath } from '../../../src/config/index.js';

const require = createRequire(import.meta.url);

describe('The two passes of npm test', function () {
  const parallel = require(projectPath('test', 'mocharc-parallel.cjs')) as { spec: string[] };
  const serial = require(projectPath('test', 'mocharc-serial.cjs')) as { spec: string[] };
  const lists = require(projectPath('test', 'serial-files.json')) as { longFirst: { files: string[] } };

  it('run every test file once, in one pass or the other', function () {
    const all = globSync('test/**/*.test.ts', { cwd: projectPath() }).sort();
    expect([...parallel.spec, ...serial.spec].sort()).to.deep.equal(all);
  });

  it('start the longest files of the parallel pass first, each a file that exists', function () {
    expect(
      lists.longFirst.files.filter((file) => !parallel.spec.includes(file)),
      'listed but not run',
    ).to.deep.equal([]);
    expect(parallel.spec.slice(0, lists.longFirst.files.length)).to.deep.equal(lists.longFirst.files);
  });
});
