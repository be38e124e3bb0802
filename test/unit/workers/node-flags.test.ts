import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { projectPath } from '../../../src/config/index.js';
import { SERVER_NODE_FLAGS, withServerNodeFlags } from '../../../src/workers/node-flags.js';

/** The growing factor V8 chose after a full collection in a process that applied `percent` (V8's trace of it). */
function growingFactorAfter(percent: number): string | undefined {
  const module = pathToFileURL(projectPath('src', 'workers', 'node-flags.ts')).href;
  const script = `import(${JSON.stringify(module)}).then(({ applyHeapGrowth }) => {
    applyHeapGrowth(${percent});
    const kept = Array.from({ length: 200000 }, (_, i) => ({ i }));
    globalThis.gc();
    console.log(kept.length);
  })`;
  const trace = execFileSync(process.execPath, ['--import', 'tsx', '--expose-gc', '--trace-gc-verbose', '-e', script], {
    encoding: 'utf8',
  });
  return /\[HeapController\] factor (\d+\.\d)/.exec(trace)?.[1];
}

describe("The server processes' Node.js options", function () {
  it('are added to what the process was started with, unless the command line or NODE_OPTIONS sets them', function () {
    expect(withServerNodeFlags(['--enable-source-maps'])).to.deep.equal(['--enable-source-maps', ...SERVER_NODE_FLAGS]);
    expect(withServerNodeFlags(['--max-semi-space-size=64'])).to.deep.equal(['--max-semi-space-size=64']);
    expect(withServerNodeFlags([], '--max_semi_space_size=8 --trace-gc')).to.deep.equal([]);
  });

  it('are the ones npm start and the image start the server with', function () {
    const start = readFileSync(projectPath('scripts', 'start.sh'), 'utf8');
    const image = readFileSync(projectPath('Dockerfile'), 'utf8');
    for (const flag of SERVER_NODE_FLAGS) {
      expect(start, 'scripts/start.sh').to.contain(flag);
      expect(image, 'Dockerfile').to.contain(`"${flag}"`);
    }
  });

  it('HEAP_GROWTH_PERCENT sets the growing factor of the old generation while the process runs', function () {
    this.timeout(30_000);
    expect(growingFactorAfter(100)).to.equal('2.0');
    expect(growingFactorAfter(50)).to.equal('1.5');
  });
});
