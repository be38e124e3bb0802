import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { Sealer } from '../../../src/store/index.js';
import { memoryStore } from '../../support/unit.js';

/** What the store keeps sealed (signing keys, upstream client secrets, SSF headers) opens only as sealed. */
describe('unit: the sealer (store/sealed.ts)', function () {
  const store = memoryStore();

  it('opens what it sealed, and refuses a value with its tag or nonce cut short (found 2026-11-30: a 4-byte tag opened)', async function () {
    const sealer = await Sealer.open(store(), randomBytes(32).toString('base64url'));
    const sealed = sealer.seal('an upstream client secret');
    expect(sealer.unseal(sealed)).to.equal('an upstream client secret');
    const [iv, tag, body] = sealed.slice('sealed:v1:'.length).split('.') as [string, string, string];
    const cut = (part: string, bytes: number) =>
      Buffer.from(part, 'base64url').subarray(0, bytes).toString('base64url');
    for (const altered of [
      `${iv}.${cut(tag, 4)}.${body}`,
      `${iv}.${cut(tag, 12)}.${body}`,
      `${cut(iv, 8)}.${tag}.${body}`,
    ])
      expect(() => sealer.unseal(`sealed:v1:${altered}`), altered).to.throw(/cannot be opened/);
  });
});
