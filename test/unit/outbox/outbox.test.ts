import { memoryStore } from '../../support/unit.js';
import { describeOutbox } from '../../support/ssf-outbox.js';

describe('outbox (src/outbox) on SQLite', function () {
  describeOutbox(memoryStore());
});
