import { expect } from 'chai';
import { oneAtATime } from '../../../src/admin/decisions.js';
import { HttpError } from '../../../src/http/errors.js';

/** A promise and the function that settles it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe('unit: explanations one at a time, a few waiting at most (admin/decisions oneAtATime)', function () {
  it('runs each after the one before, in order, and refuses a call beyond the bound with a 503 at once', async function () {
    const explaining = oneAtATime(2);
    const order: string[] = [];
    const first = gate();
    const running = explaining(async () => {
      order.push('first begins');
      await first.opened;
      order.push('first ends');
      return 1;
    });
    const waiting = explaining(async () => {
      order.push('second begins');
      return 2;
    });
    const refused = await explaining(async () => 3).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).to.be.instanceOf(HttpError).and.include({ status: 503, code: 'temporarily_unavailable' });
    await Promise.resolve();
    expect(order, 'the second waits for the first').to.deep.equal(['first begins']);
    first.open();
    expect(await Promise.all([running, waiting])).to.deep.equal([1, 2]);
    expect(order).to.deep.equal(['first begins', 'first ends', 'second begins']);
    expect(await explaining(async () => 4), 'a place is free again').to.equal(4);
  });

  it('goes on after a run that failed', async function () {
    const explaining = oneAtATime(2);
    const failed = explaining(async () => {
      throw new Error('OPA did not answer');
    });
    const next = explaining(async () => 'answered');
    expect(await failed.catch((error: Error) => error.message)).to.equal('OPA did not answer');
    expect(await next).to.equal('answered');
  });
});
