import { expect } from 'chai';
import { tmpdir } from 'node:os';
import { GIVEN_TMPDIR, isTmpfs, memoryScratchUsable } from '../../support/scratch.js';

describe('Test scratch', function () {
  it('puts what the tests write (stores, clusters, OPA folders) in memory where the machine has a roomy tmpfs', function () {
    // The root hook (test/support/root.ts) chose before any test file was loaded.
    const given = process.env[GIVEN_TMPDIR];
    expect(given, 'the root hook ran').to.be.a('string');
    if (given) {
      expect(tmpdir(), 'a TMPDIR the run was given is kept').to.equal(given);
    } else if (memoryScratchUsable()) {
      expect(tmpdir()).to.match(/^\/dev\/shm\/arbiter-suite-\d+$/);
      expect(isTmpfs(tmpdir()), `${tmpdir()} is a tmpfs`).to.equal(true);
    } else {
      expect(tmpdir()).to.equal('/tmp');
    }
  });
});
