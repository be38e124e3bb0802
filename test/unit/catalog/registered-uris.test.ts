import { expect } from 'chai';
import { redirectUriProblem } from '../../../src/catalog/registered-uris.js';

const problem = (uri: string) => redirectUriProblem(new URL(uri));

describe('unit: redirect URIs OAuth 2.1 allows (catalog/registered-uris)', function () {
  it('accepts https anywhere, and http on the loopback interface only', function () {
    for (const uri of [
      'https://app.example.test/cb',
      'https://app.example.test:8443/cb?x=1',
      'http://127.0.0.1/cb',
      'http://127.0.0.1:49152/cb',
      'http://[::1]:8080/cb',
      'http://localhost/cb',
    ])
      expect(problem(uri), uri).to.equal(null);
  });

  it('refuses http elsewhere, naming the loopback exception', function () {
    expect(problem('http://app.example.test/cb')).to.match(/must use https, except on the loopback interface/);
    expect(problem('http://127.0.0.2/cb')).to.match(/must use https/);
  });

  it('refuses other schemes, credentials and wildcards', function () {
    expect(problem('com.example.app:/cb')).to.equal('must be http or https URIs');
    expect(problem('javascript:alert(1)')).to.equal('must be http or https URIs');
    expect(problem('https://user:pw@app.example.test/cb')).to.equal('must not contain credentials (user:password@)');
    expect(problem('https://user@app.example.test/cb')).to.equal('must not contain credentials (user:password@)');
    expect(problem('https://*.example.test/cb')).to.equal('must not contain a wildcard');
    expect(problem('https://app.example.test/*')).to.equal('must not contain a wildcard');
  });
});
