import { closeSharedFixtures } from './server.js';

// Loaded first as a spec file (see .mocharc.json) so that this root-level hook closes the
// servers and fixtures the test files share (withServer, sharedFixture). A mocha `--require`
// plugin would load this module through CommonJS and see a different copy of that state.
after(async function () {
  await closeSharedFixtures();
});
