import { buildConsole } from '../../scripts/build-console.js';
import { runThreadsCompiled } from '../../src/policy/index.js';
import { projectPath } from '../../src/config/index.js';
import { compiledIsFresh } from './entry-point.js';
import { closeSharedFixtures } from './server.js';

// Loaded first as a spec file (see .mocharc.json) so that these root-level hooks run once around
// every test file. A mocha `--require` plugin would load this module through CommonJS and see a
// different copy of the shared state.

// The policy threads of every test server load the build's modules when dist/ is as new as the
// sources (`npm test` builds it first): under tsx each thread transforms its modules as it starts.
if (compiledIsFresh()) runThreadsCompiled(projectPath('dist', 'src'));

// The server serves the console `npm run build` wrote (dist/console/): built here from the
// sources under test, so that a run of single test files never serves a missing or stale one.
before(async function () {
  await buildConsole();
});

// Closes the servers and fixtures the test files share (withServer, sharedFixture).
after(async function () {
  await closeSharedFixtures();
});
