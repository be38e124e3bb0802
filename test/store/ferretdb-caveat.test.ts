import { expect } from 'chai';
import { readyServer } from '../support/server.js';
import { preferredBackend, sharedMongoTestServer } from './mongo-server.js';

/**
 * A server on FerretDB says at start that its single-use guarantees rest on writes FerretDB does
 * not make atomic (docs/scaling.md): it started without a word before (found 2026-11-30).
 */
describe('A store on FerretDB', function () {
  it('is named at start with a warning that its conditional writes are not atomic (a real MongoDB with none)', async function () {
    this.timeout(60_000);
    const mongo = await sharedMongoTestServer(preferredBackend());
    const lines: string[] = [];
    const server = await readyServer(
      { STORE_URL: mongo.uri(mongo.freshDatabase()), LOG_LEVEL: 'warn' },
      { logStream: { write: (line: string) => void lines.push(line) } },
    );
    try {
      const warnings = lines.map((line) => JSON.parse(line) as { level: number; msg: string });
      const caveat = warnings.find((line) => line.msg.includes('FerretDB'));
      // MONGODB_URI may name a real MongoDB, of which there is nothing to say.
      if (!mongo.ferretdbVersion) {
        expect(caveat, lines.join('\n')).to.equal(undefined);
        return;
      }
      expect(caveat, lines.join('\n')).to.not.equal(undefined);
      expect(caveat!.level).to.equal(40);
      expect(caveat!.msg).to.match(/is FerretDB \S+, which does not apply conditional updates atomically/);
    } finally {
      await server.close();
    }
  });

  it('names nothing of the kind on SQLite', async function () {
    const lines: string[] = [];
    const server = await readyServer(
      { LOG_LEVEL: 'warn' },
      { logStream: { write: (line: string) => void lines.push(line) } },
    );
    try {
      expect(lines.join('\n')).to.not.contain('FerretDB');
    } finally {
      await server.close();
    }
  });
});
