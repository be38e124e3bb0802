import { expect } from 'chai';
import { MachineOpa, type StartableOpa } from '../../../src/workers/machine-opa.js';
import type { OpaLocation } from '../../../src/workers/protocol.js';

/** An OPA process stand-in (the primary's bookkeeping is the subject): it starts on a port, and may be made to move. */
function fakeOpa() {
  let tell: (url: string, pid: number | undefined) => void = () => undefined;
  const made: StartableOpa[] = [];
  const make = (onStarted: typeof tell) => {
    tell = onStarted;
    const opa: StartableOpa = {
      apiToken: 'token',
      start: async () => onStarted('http://127.0.0.1:4001', 101),
      stop: async () => undefined,
    };
    made.push(opa);
    return opa;
  };
  return { make, made, restartOn: (url: string, pid: number) => tell(url, pid) };
}

describe('unit: the machine OPA the primary tells its workers of (workers/machine-opa)', function () {
  it('tells a worker that asks after OPA moved where it listens now, and the workers up of each move', async function () {
    const opa = fakeOpa();
    const moves: OpaLocation[] = [];
    const machine = new MachineOpa(opa.make, (location) => moves.push(location));
    expect((await machine.whereFor()).opa).to.deep.equal({ url: 'http://127.0.0.1:4001', token: 'token', pid: 101 });
    expect(moves, 'the first start is no move').to.deep.equal([]);
    // A restart on another port (its first was taken meanwhile).
    opa.restartOn('http://127.0.0.1:4002', 102);
    expect(moves).to.deep.equal([{ url: 'http://127.0.0.1:4002', token: 'token', pid: 102 }]);
    // Found 2026-11-30: a worker that asked now (a replacement, a promoted standby) was told port 4001.
    expect((await machine.whereFor()).opa).to.deep.equal({ url: 'http://127.0.0.1:4002', token: 'token', pid: 102 });
    expect(machine.pid).to.equal(102);
    expect(opa.made, 'one OPA for the machine').to.have.length(1);
  });

  it('answers every worker why OPA could not start, and starts it once', async function () {
    let starts = 0;
    const machine = new MachineOpa(
      () => ({
        apiToken: 'token',
        start: async () => {
          starts += 1;
          throw new Error('no opa binary');
        },
        stop: async () => undefined,
      }),
      () => undefined,
    );
    for (let worker = 0; worker < 2; worker++)
      expect(await machine.whereFor()).to.deep.equal({
        opa: null,
        error: 'the managed OPA could not be started: no opa binary',
      });
    expect(starts).to.equal(1);
    await machine.stop();
  });
});
