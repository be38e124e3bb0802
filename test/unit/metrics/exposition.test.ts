import { expect } from 'chai';
import type { Context } from 'koa';
import { isUnavailable } from '../../../src/http/errors.js';
import { Metrics } from '../../../src/metrics/index.js';
import type { Store } from '../../../src/store/index.js';

const scrape = () => ({ method: 'GET', get: () => '', set() {}, body: undefined, type: '' }) as unknown as Context;

describe('unit: GET /metrics of a worker, which its primary gathers (metrics)', function () {
  // Found 2026-11-30: a primary that did not answer within the worker's wait made the scrape a 500.
  it('answers 503 with the reason when the primary cannot gather the workers’ metrics', async function () {
    const metrics = new Metrics(
      {} as Store,
      () => undefined,
      async () => {
        throw new Error('the primary did not answer within 10000 ms');
      },
    );
    const refusal = await metrics
      .endpoint(null)(scrape())
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(isUnavailable(refusal), String(refusal)).to.equal(true);
    expect(refusal).to.include({ status: 503, reason: 'the primary did not answer within 10000 ms' });
  });

  it('answers the text the primary gathered', async function () {
    const metrics = new Metrics(
      {} as Store,
      () => undefined,
      async () => 'arbiter_workers_up 2\n',
    );
    const ctx = scrape();
    await metrics.endpoint(null)(ctx);
    expect(ctx.body).to.equal('arbiter_workers_up 2\n');
  });
});
