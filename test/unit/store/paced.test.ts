import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { EVENT_LOOP_PACE, inPacedSteps } from '../../../src/store/index.js';

/** A chore of `rows` rows costing `msPerRow` each (a timer: wall time, as a loaded machine's step), recording each step's limit. */
function slowChore(rows: number, msPerRow: number) {
  const limits: number[] = [];
  let left = rows;
  const step = async (limit: number) => {
    limits.push(limit);
    const did = Math.min(limit, left);
    left -= did;
    if (msPerRow > 0) await sleep(did * msPerRow);
    return did;
  };
  return { limits, step };
}

describe('paced steps (purges and vacuum on the event loop)', () => {
  it('starts small, since the cost of a row is not known yet, and doubles while steps are fast', async () => {
    // Found 2026-11-29: a first step of 1,000 artefacts (~70 µs each) held every request 137 ms.
    const { limits, step } = slowChore(10_000, 0);
    expect(await inPacedSteps(step, EVENT_LOOP_PACE)).to.equal(10_000);
    expect(limits[0]).to.equal(64);
    // Doubled after each fast step (a pause of this process, as a collection, may hold one back).
    expect(limits[1], `limits ${limits.join(', ')}`).to.be.oneOf([64, 128]);
    expect(Math.max(...limits)).to.equal(EVENT_LOOP_PACE.maxPerStep);
  });

  it('sizes the step after a slow one to the budget from the measured rate, not to half of it', async () => {
    // 2 ms a row: the first step of 64 takes 128 ms, 25 times the budget.
    const { limits, step } = slowChore(200, 2);
    expect(await inPacedSteps(step, EVENT_LOOP_PACE)).to.equal(200);
    expect(limits[0]).to.equal(64);
    // 5 ms at 2 ms a row is 2 rows, held up by the floor of 16; a slower timer on a loaded machine never makes it larger.
    expect(limits[1], `limits ${limits.join(', ')}`).to.equal(16);
    expect(Math.min(...limits)).to.be.at.least(16);
  });

  it('grows the step back while steps take less than half the budget', async () => {
    const limits: number[] = [];
    let calls = 0;
    const step = async (limit: number) => {
      limits.push(limit);
      calls += 1;
      // Slow first (a loaded moment), then instant: the limit climbs back to its maximum.
      if (calls === 1) await sleep(100);
      return calls < 12 ? limit : 0;
    };
    await inPacedSteps(step, EVENT_LOOP_PACE);
    expect(limits[1]).to.be.below(100);
    expect(limits[limits.length - 1]).to.equal(EVENT_LOOP_PACE.maxPerStep);
  });
});
