import { closeSharedServer } from './server.js';

// Loaded first as a spec file (see .mocharc.json) so that this root-level hook closes the
// server that the test files share. A mocha `--require` plugin would load this module
// through CommonJS and see a different copy of the shared-server state.
after(async function () {
  await closeSharedServer();
});
