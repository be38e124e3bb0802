import { expect } from 'chai';
import { fetchMayUse, freePort } from '../../support/server.js';

// The Fetch standard's bad ports (fetch.spec.whatwg.org, "port blocking"), refused by undici's fetch
// and by Chromium whatever listens there.
const BAD_PORTS = [
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110,
  111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532,
  540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061,
  6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
];

describe('Test ports', function () {
  it('never draws a port fetch refuses (a CI run drew 10080 and failed with "bad port")', function () {
    expect(BAD_PORTS.filter(fetchMayUse).filter((port) => port >= 10_000)).to.deep.equal([]);
  });

  it('matches what fetch does: 10080 is refused before any connection, a drawn port is not', async function () {
    const refused = await fetch('http://127.0.0.1:10080/').catch((error: Error) => error);
    expect(String((refused as Error).cause)).to.match(/bad port/);
    const port = await freePort();
    const nobodyThere = await fetch(`http://127.0.0.1:${port}/`).catch((error: Error) => error);
    expect(String((nobodyThere as Error).cause)).to.match(/ECONNREFUSED/);
  });
});
