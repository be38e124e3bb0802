import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { projectPath } from '../../../src/config/index.js';
import { SERVER_NODE_FLAGS, withServerNodeFlags } from '../../../src/workers/node-flags.js';

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
});
