import { expect } from 'chai';
import { clientCredentials, confidentialClient, postForm } from '../support/oauth.js';
import { DpopKey } from '../support/dpop.js';
import { withServer, type TestServer } from '../support/server.js';

const RESOURCES = '/resource_registration/resource';
const PAT = { resource: 'urn:as:introspect', scope: 'uma_protection' };

/**
 * RFC 9449 §7.1 at Arbiter's own APIs (src/oauth/shared/callers.ts: UMA, delegation, AuthZEN,
 * Shared Signals, Bearer callers at /introspect): a DPoP-bound access token is presented as
 * `Authorization: DPoP <token>` with a proof of its key for this very request (method, URL, the
 * token's `ath`, a fresh `jti`), never as a Bearer token. Found 2026-11-30: every DPoP-bound token
 * was refused there, whatever came with it, so a client held to DPoP (FAPI 2.0's default) could
 * use none of these APIs.
 */
describe("DPoP-bound access tokens at Arbiter's own APIs (RFC 9449 §7.1)", function () {
  let server: TestServer;
  let secret: string;
  let key: DpopKey;
  let other: DpopKey;

  before(async function () {
    server = await withServer();
    secret = await confidentialClient(server, 'dpop-api-rs', { scopes: ['uma_protection', 'introspection'] });
    key = await DpopKey.generate();
    other = await DpopKey.generate();
  });

  const url = (path: string) => `${server.config.issuer}${path}`;
  /** A token of the client, bound to `key` (a proof at /token). */
  const boundToken = async (form: Record<string, string>) => {
    const answer = await clientCredentials(server, 'dpop-api-rs', secret, form, {
      DPoP: await key.proof('POST', url('/token')),
    });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect(answer.body.token_type).to.equal('DPoP');
    return answer.body.access_token as string;
  };
  const listResources = async (headers: Record<string, string>) => {
    const answer = await server.request(RESOURCES, { headers });
    return {
      status: answer.status,
      challenge: answer.headers.get('www-authenticate'),
      body: (await answer.json()) as any,
    };
  };

  it('takes a bound PAT with a proof of its key made for the request, at the UMA protection API', async function () {
    const pat = await boundToken(PAT);
    const answer = await listResources({
      Authorization: `DPoP ${pat}`,
      DPoP: await key.proof('GET', url(RESOURCES), { accessToken: pat }),
    });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect(answer.body).to.be.an('array');
  });

  it('refuses it as Bearer, without a proof, with a proof of another key, for another request or token, or replayed', async function () {
    const pat = await boundToken(PAT);
    const refusals: [string, Record<string, string>, RegExp][] = [
      [
        'as Bearer',
        { Authorization: `Bearer ${pat}`, DPoP: await key.proof('GET', url(RESOURCES), { accessToken: pat }) },
        /Bearer error="invalid_token"/,
      ],
      ['without a proof', { Authorization: `DPoP ${pat}` }, /DPoP error="invalid_dpop_proof"/],
      [
        'a proof of another key',
        { Authorization: `DPoP ${pat}`, DPoP: await other.proof('GET', url(RESOURCES), { accessToken: pat }) },
        /DPoP error="invalid_dpop_proof"/,
      ],
      [
        'a proof without ath',
        { Authorization: `DPoP ${pat}`, DPoP: await key.proof('GET', url(RESOURCES)) },
        /DPoP error="invalid_dpop_proof"/,
      ],
      [
        'a proof for another method',
        { Authorization: `DPoP ${pat}`, DPoP: await key.proof('POST', url(RESOURCES), { accessToken: pat }) },
        /DPoP error="invalid_dpop_proof"/,
      ],
      [
        'a proof for another URL',
        { Authorization: `DPoP ${pat}`, DPoP: await key.proof('GET', url('/userinfo'), { accessToken: pat }) },
        /DPoP error="invalid_dpop_proof"/,
      ],
      [
        'a proof for another token',
        {
          Authorization: `DPoP ${pat}`,
          DPoP: await key.proof('GET', url(RESOURCES), { accessToken: 'another-token' }),
        },
        /DPoP error="invalid_dpop_proof"/,
      ],
    ];
    for (const [what, headers, challenge] of refusals) {
      const answer = await listResources(headers);
      expect(answer.status, `${what}: ${JSON.stringify(answer.body)}`).to.equal(401);
      expect(answer.challenge, what).to.match(challenge);
    }
    const once = await key.proof('GET', url(RESOURCES), { accessToken: pat });
    expect((await listResources({ Authorization: `DPoP ${pat}`, DPoP: once })).status).to.equal(200);
    const replayed = await listResources({ Authorization: `DPoP ${pat}`, DPoP: once });
    expect(replayed.status, 'the same proof again').to.equal(401);
    expect(replayed.body.error_description).to.match(/replay/i);
  });

  it('refuses an unbound token presented with the DPoP scheme', async function () {
    const bearer = await clientCredentials(server, 'dpop-api-rs', secret, PAT);
    const pat = bearer.body.access_token as string;
    const answer = await listResources({
      Authorization: `DPoP ${pat}`,
      DPoP: await key.proof('GET', url(RESOURCES), { accessToken: pat }),
    });
    expect(answer.status).to.equal(401);
    expect(answer.body.error).to.equal('invalid_token');
    // The challenge of the scheme the token is to come with (uma-hostile.test.ts asks the same of any such header).
    expect(answer.challenge).to.match(/^Bearer error="invalid_token"/);
  });

  it('takes a bound token of a resource server at /introspect with its proof', async function () {
    const caller = await boundToken({ scope: 'introspection' });
    const introspected = await boundToken({ scope: 'uma_protection' });
    const answer = await postForm(
      server,
      '/introspect',
      { token: introspected },
      { Authorization: `DPoP ${caller}`, DPoP: await key.proof('POST', url('/introspect'), { accessToken: caller }) },
    );
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect(answer.body).to.include({ active: true, token_type: 'DPoP' });
    const bare = await postForm(server, '/introspect', { token: introspected }, { Authorization: `DPoP ${caller}` });
    expect(bare.status).to.equal(401);
  });
});
