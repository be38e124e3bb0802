import { expect } from 'chai';
import { lstatSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GIVEN_TMPDIR, isTmpfs, memoryScratchUsable, tsxCacheName } from '../../support/scratch.js';

describe('Test scratch', function () {
  it("puts what the tests write (stores, clusters, OPA folders) in memory where the machine has a roomy tmpfs, and keeps tsx's cache the machine's", function () {
    // The root hook (test/support/root.ts) chose before any test file was loaded.
    const given = process.env[GIVEN_TMPDIR];
    expect(given, 'the root hook ran').to.be.a('string');
    if (given) {
      expect(tmpdir(), 'a TMPDIR the run was given is kept').to.equal(given);
    } else if (memoryScratchUsable()) {
      expect(tmpdir()).to.match(/^\/dev\/shm\/arbiter-suite-\d+$/);
      expect(isTmpfs(tmpdir()), `${tmpdir()} is a tmpfs`).to.equal(true);
      // tsx's cache stays the machine's, which the serial pass (a mocha of its own) reads.
      const link = join(tmpdir(), tsxCacheName());
      expect(lstatSync(link).isSymbolicLink(), `${link} is a link`).to.equal(true);
      expect(readlinkSync(link)).to.equal(join('/tmp', tsxCacheName()));
    } else {
      expect(tmpdir()).to.equal('/tmp');
    }
  });
});
