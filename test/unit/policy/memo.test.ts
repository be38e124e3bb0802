import { expect } from 'chai';
import { contentKey, ContentMemo } from '../../../src/policy/opa/memo.js';

/** A memo of strings sized by their length, and how many times each key was computed. */
function memo(limits: { maxEntries?: number; maxBytes?: number } = {}) {
  const computed = new Map<string, number>();
  const cache = new ContentMemo<string | null>({
    maxEntries: limits.maxEntries ?? 10,
    maxBytes: limits.maxBytes ?? 1000,
    sizeOf: (value) => value?.length ?? 0,
  });
  const get = (key: string, value: string | null = key, keep?: (value: string | null) => boolean) =>
    cache.get(
      key,
      () => {
        computed.set(key, (computed.get(key) ?? 0) + 1);
        return Promise.resolve(value);
      },
      keep,
    );
  return { get, cache, computed };
}

describe('Unit: content memo of OPA outcomes (src/policy/opa/memo.ts)', function () {
  it('keys on every part and its length: moving bytes between parts changes the key', function () {
    expect(contentKey('ab', 'c')).to.equal(contentKey('ab', Buffer.from('c')));
    expect(contentKey('ab', 'c')).not.to.equal(contentKey('a', 'bc'));
    expect(contentKey('abc')).not.to.equal(contentKey('ab', 'c'));
  });

  it('computes a key once it has an outcome; callers asking at once each compute (OPA limits apply to each)', async function () {
    const { get, computed } = memo();
    const both = await Promise.all([get('a'), get('a')]);
    await get('a');
    expect(both).to.deep.equal(['a', 'a']);
    expect(computed.get('a')).to.equal(2);
  });

  it('does not keep a computation that failed, nor an outcome `keep` declines', async function () {
    const { cache, get, computed } = memo();
    let calls = 0;
    const failing = () => {
      calls += 1;
      return Promise.reject(new Error('busy'));
    };
    await cache.get('f', failing).catch(() => undefined);
    await cache.get('f', failing).catch(() => undefined);
    expect(calls).to.equal(2);
    const passesOnly = (value: string | null) => value === null;
    await get('refused', 'slow', passesOnly);
    await get('refused', 'slow', passesOnly);
    await get('passed', null, passesOnly);
    await get('passed', null, passesOnly);
    expect(computed.get('refused')).to.equal(2);
    expect(computed.get('passed')).to.equal(1);
  });

  it('drops the least recently used past its entries or its bytes', async function () {
    const { get, computed } = memo({ maxEntries: 2 });
    await get('a');
    await get('b');
    await get('a'); // a is now the most recently used
    await get('c'); // b leaves
    await get('a');
    await get('b');
    expect(computed.get('a')).to.equal(1);
    expect(computed.get('b')).to.equal(2);

    const bytes = memo({ maxBytes: 10 });
    await bytes.get('k1', '12345678');
    await bytes.get('k2', '1234'); // 12 bytes: k1 leaves
    await bytes.get('k2');
    await bytes.get('k1', '12345678');
    expect(bytes.computed.get('k2')).to.equal(1);
    expect(bytes.computed.get('k1')).to.equal(2);
  });
});
