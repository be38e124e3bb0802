import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { DpopKey } from '../support/dpop.js';
import { basic, confidentialClient, FORM } from '../support/oauth.js';
import { inTenant, readyServer, type TestServer } from '../support/server.js';

/**
 * RFC 9449 §8: a tenant named in DPOP_NONCE_TENANTS asks every DPoP proof for a nonce of the
 * server; the others (and the default) take proofs without one, as before.
 */
describe('DPoP nonces (RFC 9449 §8), per tenant', function () {
  let server: TestServer;
  let strict: TestServer;
  let key: { privateKey: CryptoKey; jwk: JWK };
  const secrets: Record<string, string> = {};

  before(async function () {
    server = await readyServer({ TENANTS: 'nonces', DPOP_NONCE_TENANTS: 'nonces' });
    strict = inTenant(server, 'nonces');
    secrets.strict = await confidentialClient(strict, 'nonce-client', { scopes: ['read'] }, 'nonces');
    secrets.plain = await confidentialClient(server, 'plain-client', { scopes: ['read'] });
    const pair = await generateKeyPair('ES256');
    key = { privateKey: pair.privateKey, jwk: await exportJWK(pair.publicKey) };
  });
  after(async function () {
    await server?.close();
  });

  const proof = (nonce?: string) =>
    new SignJWT({
      htm: 'POST',
      htu: `${server.config.issuer}/token`,
      jti: randomUUID(),
      iat: Math.floor(Date.now() / 1000),
      ...(nonce ? { nonce } : {}),
    })
      .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: key.jwk })
      .sign(key.privateKey);

  async function token(at: TestServer, clientId: string, secret: string, dpop: string) {
    const answer = await at.request('/token', {
      method: 'POST',
      headers: {
        ...FORM,
        DPoP: dpop,
        Authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'read' }).toString(),
    });
    return { status: answer.status, nonce: answer.headers.get('dpop-nonce'), body: (await answer.json()) as any };
  }

  it('refuses a proof without a nonce with use_dpop_nonce and a DPoP-Nonce, then takes the proof with it', async function () {
    const first = await token(strict, 'nonce-client', secrets.strict!, await proof());
    expect(first.status, JSON.stringify(first.body)).to.equal(400);
    expect(first.body.error).to.equal('use_dpop_nonce');
    expect(first.nonce).to.be.a('string').and.not.equal('');

    const second = await token(strict, 'nonce-client', secrets.strict!, await proof(first.nonce!));
    expect(second.status, JSON.stringify(second.body)).to.equal(200);
    expect(second.body.token_type).to.equal('DPoP');
  });

  it('refuses a nonce the server never gave', async function () {
    const answer = await token(strict, 'nonce-client', secrets.strict!, await proof('made-up-nonce'));
    expect(answer.status).to.equal(400);
    expect(answer.body.error).to.equal('use_dpop_nonce');
  });

  it('asks no nonce of the tenants it does not name', async function () {
    const answer = await token(server, 'plain-client', secrets.plain!, await proof());
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect(answer.body.token_type).to.equal('DPoP');
  });

  it('takes one proof once, also from requests sent at once (RFC 9449 §11.1)', async function () {
    const once = await proof();
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => token(server, 'plain-client', secrets.plain!, once)),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(
      statuses.filter((status) => status === 200),
      JSON.stringify(statuses),
    ).to.have.length(1);
    for (const refused of answers.filter((answer) => answer.status !== 200))
      expect(refused.body.error_description).to.contain('Replay detected');
  });

  it("asks a nonce of the proof that comes with a bound token at Arbiter's own APIs too (UMA protection API)", async function () {
    const secret = await confidentialClient(strict, 'nonce-rs', { scopes: ['uma_protection'] }, 'nonces');
    const bound = await DpopKey.generate();
    const resources = `${server.config.issuer}/resource_registration/resource`;
    const patRequest = async (nonce?: string) =>
      strict.request('/token', {
        method: 'POST',
        headers: {
          ...FORM,
          DPoP: await bound.proof('POST', `${server.config.issuer}/token`, { nonce }),
          Authorization: basic('nonce-rs', secret),
        },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          scope: 'uma_protection',
          resource: 'urn:as:introspect',
        }).toString(),
      });
    const issued = await patRequest((await patRequest()).headers.get('dpop-nonce')!);
    expect(issued.status).to.equal(200);
    const pat = ((await issued.json()) as any).access_token as string;

    const listed = async (nonce?: string) =>
      strict.request('/resource_registration/resource', {
        headers: {
          Authorization: `DPoP ${pat}`,
          DPoP: await bound.proof('GET', resources, { accessToken: pat, nonce }),
        },
      });
    const without = await listed();
    expect(without.status).to.equal(401);
    expect(without.headers.get('www-authenticate')).to.match(/DPoP error="use_dpop_nonce"/);
    const given = without.headers.get('dpop-nonce');
    expect(given).to.be.a('string').and.not.equal('');
    const withNonce = await listed(given!);
    expect(withNonce.status, await withNonce.clone().text()).to.equal(200);
  });
});
