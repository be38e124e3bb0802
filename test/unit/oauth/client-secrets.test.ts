import { expect } from 'chai';
import { generateClientSecret, wasGenerated } from '../../../src/oauth/clients/secrets.js';

/** Which secrets the server generates, and which BCrypt-kept ones it may take for generated (src/oauth/clients/secrets.ts). */
describe('generated client secrets', function () {
  it('generates 43 letters and digits (256 bits), a new one each time', function () {
    const secrets = new Set(Array.from({ length: 100 }, generateClientSecret));
    expect(secrets.size).to.equal(100);
    for (const secret of secrets) expect(secret).to.match(/^[A-Za-z0-9]{43}$/);
  });

  it("takes a random-looking 32-character secret for an earlier release's, and any of that form from registration", function () {
    expect(wasGenerated('q7Hk2LmP9xZr4TbV8nWc1YsJ6dFg3AeU', undefined)).to.equal(true);
    for (const typed of ['abcdabcdabcdabcdabcdabcdabcd1234', 'NoDigitsInThisOneAtAllAbcdefghij', 'short1Aa'])
      expect(wasGenerated(typed, undefined), typed).to.equal(false);
    expect(wasGenerated('abcdabcdabcdabcdabcdabcdabcd1234', 'dcr')).to.equal(true);
    expect(wasGenerated('has-a-dash-so-not-generated-1234', 'dcr')).to.equal(false);
  });
});
