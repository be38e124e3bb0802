import { once } from 'node:events';
import { createServer, connect, type AddressInfo } from 'node:net';
import { expect } from 'chai';
import { storeErrorOf } from '../../../adapters/mongodb/index.js';
import { StoreUnavailableError } from '../../../src/store/types.js';

/**
 * The error a socket gives when the process writes on it after its server ended the connection:
 * Node's own "This socket has been ended by the other party" (EPIPE), from a real socket.
 */
async function writeAfterTheServerEnded(): Promise<Error> {
  const server = createServer((socket) => socket.end());
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    socket.resume();
    await once(socket, 'end');
    const failed = new Promise<Error>((resolve) => socket.write('after the end', (error) => resolve(error!)));
    socket.on('error', () => undefined);
    return await failed;
  } finally {
    server.close();
  }
}

describe('unit: a MongoDB store whose server ended the connection (adapters/mongodb)', function () {
  it('rejects with StoreUnavailableError (503) when the driver lets the socket error through, not with the raw error (a 500)', async function () {
    const raw = await writeAfterTheServerEnded();
    expect((raw as NodeJS.ErrnoException).code).to.equal('EPIPE');
    const error = storeErrorOf(raw);
    expect(error).to.be.instanceOf(StoreUnavailableError);
    expect((error as StoreUnavailableError).reason).to.match(
      /MongoDB store cannot be reached \(Error: This socket has been ended/,
    );
  });

  it("leaves an error that is not the store's as it is", function () {
    const mistake = new TypeError('a bug of the caller');
    expect(storeErrorOf(mistake)).to.equal(mistake);
  });
});
