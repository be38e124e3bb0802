import { expect } from 'chai';
import { X509Certificate } from 'node:crypto';
import { mtlsEndpointAliases, parseForwardedCertificate, subjectMatches } from '../../../src/oauth/mtls/index.js';
import { TestPki } from '../../support/certificates.js';

/** RFC 8705 §2.1.2 subject values and the forms proxies forward certificates in (oauth/mtls), on openssl-made certificates. */
describe('unit: client certificates (oauth/mtls)', function () {
  let pki: TestPki;
  let certificate: X509Certificate;
  let pem: string;

  before(async function () {
    pki = new TestPki();
    ({ cert: pem } = await pki.issue('client', '/C=NZ/O=Example\\, Inc./CN=client.example', {
      selfSigned: true,
      san: 'DNS:client.example,IP:2001:db8::1,email:Ops@Example.com,URI:https://client.example/id',
    }));
    certificate = new X509Certificate(pem);
  });
  after(() => pki?.close());

  it('matches a subject DN attribute by attribute, whatever their order, an escaped comma within a value', function () {
    expect(
      subjectMatches(certificate, 'tls_client_auth_subject_dn', 'CN=client.example,O=Example\\, Inc.,C=NZ'),
    ).to.equal(true);
    expect(
      subjectMatches(certificate, 'tls_client_auth_subject_dn', 'C=NZ, O=Example\\, Inc., CN=client.example'),
    ).to.equal(true);
    expect(subjectMatches(certificate, 'tls_client_auth_subject_dn', 'CN=client.example,O=Example\\, Inc.')).to.equal(
      false,
    );
    expect(
      subjectMatches(certificate, 'tls_client_auth_subject_dn', 'CN=other.example,O=Example\\, Inc.,C=NZ'),
    ).to.equal(false);
  });

  it('matches each kind of SAN by its own rule, and no kind by another', function () {
    expect(subjectMatches(certificate, 'tls_client_auth_san_dns', 'CLIENT.example')).to.equal(true);
    expect(subjectMatches(certificate, 'tls_client_auth_san_ip', '2001:0db8:0:0:0:0:0:1')).to.equal(true);
    expect(subjectMatches(certificate, 'tls_client_auth_san_email', 'ops@example.com')).to.equal(true);
    expect(subjectMatches(certificate, 'tls_client_auth_san_uri', 'https://client.example/id')).to.equal(true);
    expect(subjectMatches(certificate, 'tls_client_auth_san_uri', 'https://client.example/ID')).to.equal(false);
    expect(subjectMatches(certificate, 'tls_client_auth_san_dns', 'https://client.example/id')).to.equal(false);
    expect(subjectMatches(certificate, 'tls_client_auth_san_ip', 'not an address')).to.equal(false);
  });

  it('reads a forwarded certificate as PEM, URL-encoded PEM, PEM with spaces for newlines, or base64 DER; anything else is none', function () {
    const der = certificate.raw.toString('base64');
    for (const [form, value] of [
      ['PEM', pem],
      ['URL-encoded PEM', encodeURIComponent(pem)],
      ['PEM with spaces', pem.replace(/\n/g, ' ')],
      ['base64 DER', der],
    ] as const) {
      expect(parseForwardedCertificate(value)?.fingerprint256, form).to.equal(certificate.fingerprint256);
    }
    expect(parseForwardedCertificate('not a certificate')).to.equal(null);
    expect(parseForwardedCertificate('%E0%A4%A')).to.equal(null);
  });

  it("names a path tenant's endpoints under the alias base with the tenant's path, and only those that authenticate clients or take bound tokens", function () {
    const issuer = 'https://as.example/auth';
    const document = {
      token_endpoint: `${issuer}/t/acme/token`,
      userinfo_endpoint: `${issuer}/t/acme/userinfo`,
      authorization_endpoint: `${issuer}/t/acme/authorize`,
      jwks_uri: `${issuer}/t/acme/.well-known/jwks.json`,
    };
    expect(mtlsEndpointAliases(document, issuer, 'https://mtls.as.example/auth')).to.deep.equal({
      token_endpoint: 'https://mtls.as.example/auth/t/acme/token',
      userinfo_endpoint: 'https://mtls.as.example/auth/t/acme/userinfo',
    });
  });
});
