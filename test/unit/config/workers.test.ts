import { availableParallelism } from 'node:os';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../../src/config/index.js';

describe('WORKERS', function () {
  const onFile = { STORE_URL: 'sqlite:/tmp/arbiter-workers-config.db' };

  it('defaults to the cores available; 1 with an in-memory store, which a process has alone', function () {
    expect(loadConfig(onFile).workers).to.equal(availableParallelism());
    expect(loadConfig({ STORE_URL: 'sqlite::memory:' }).workers).to.equal(1);
    expect(loadConfig({ ...onFile, WORKERS: '3' }).workers).to.equal(3);
    expect(loadConfig({ STORE_URL: 'sqlite::memory:', WORKERS: '1' }).workers).to.equal(1);
  });

  it('refuses 0, a non-integer, and more than one worker on an in-memory store, naming the variable', function () {
    for (const value of ['0', 'two', '1.5', '257'])
      expect(() => loadConfig({ ...onFile, WORKERS: value }), value)
        .to.throw(ConfigError)
        .with.property('message')
        .that.contains('WORKERS');
    expect(() => loadConfig({ STORE_URL: 'sqlite::memory:', WORKERS: '2' })).to.throw(
      ConfigError,
      /WORKERS must be 1 with STORE_URL=sqlite::memory:/,
    );
  });
});
