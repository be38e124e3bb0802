import { expect } from 'chai';
import { withSignInServer, type TestClient } from '../support/dev-idp.js';
import { DpopKey } from '../support/dpop.js';
import { basic, clientToken, confidentialClient, postForm } from '../support/oauth.js';
import type { TestServer } from '../support/server.js';
import { ACCESS_TOKEN_FORMAT, api, UMA_GRANT, umaPublicClient, userToken } from '../uma/support.js';

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const WEB_CALLBACK = 'http://127.0.0.1:1/web/cb';
const SPA_CALLBACK = 'http://127.0.0.1:1/spa/cb';

/**
 * Issue 27, items 1, 3 and 10: a sender-constrained (DPoP-bound) token is never usable without
 * its key, not even by laundering it through token exchange or the UMA grant into a Bearer
 * token; a client exchanges (or claims with) only tokens it holds itself, unless the subject
 * token's may_act or a delegation of its user says otherwise; an actor token is the client's
 * own; and an exchange is for a resource this server knows. Every case here succeeded before.
 */
describe('bound tokens are not laundered through token exchange or the UMA grant', function () {
  let server: TestServer;
  let tokenUrl: string;
  let webSecret: string;
  let intruderSecret: string;
  let aliceKey: DpopKey;
  let web: TestClient;
  let spa: TestClient;

  before(async function () {
    ({ server } = await withSignInServer());
    tokenUrl = `${server.config.issuer}/token`;
    aliceKey = await DpopKey.generate();
    webSecret = await confidentialClient(server, 'laundering-web', {
      scopes: ['openid', 'profile'],
      redirectUris: [WEB_CALLBACK],
    });
    intruderSecret = await confidentialClient(server, 'intruder', { scopes: ['read'] });
    web = { clientId: 'laundering-web', redirectUri: WEB_CALLBACK, secret: webSecret };
    spa = await umaPublicClient(server, 'spa', SPA_CALLBACK);
  });

  /** alice's token at `holder`, bound to `key` when one is given. */
  const aliceToken = (holder: TestClient, key?: DpopKey, extra: Record<string, string> = {}) =>
    userToken(
      server,
      holder,
      'alice',
      { scope: 'openid profile', ...extra },
      async (): Promise<Record<string, string>> => (key ? { DPoP: await key.proof('POST', tokenUrl) } : {}),
    );
  const exchange = (
    clientId: string,
    secret: string,
    form: Record<string, string>,
    headers: Record<string, string> = {},
  ) =>
    postForm(
      server,
      '/token',
      { grant_type: EXCHANGE, subject_token_type: ACCESS_TOKEN, ...form },
      { Authorization: basic(clientId, secret), ...headers },
    );
  const userinfoAsBearer = async (token: string) =>
    (await server.request('/userinfo', { headers: { Authorization: `Bearer ${token}` } })).status;

  describe('token exchange', function () {
    it("refuses an unrelated client that exchanges alice's DPoP-bound token without a proof (it got a Bearer token for her before)", async function () {
      const bound = await aliceToken(spa, aliceKey);
      expect(await userinfoAsBearer(bound), 'the bound token is refused as Bearer').to.equal(401);
      const { status, body } = await exchange('intruder', intruderSecret, {
        subject_token: bound,
        scope: 'openid profile',
      });
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body.error).to.equal('invalid_grant');
      expect(body).not.to.have.property('access_token');
    });

    it('refuses a bound token without a proof, or with a proof of another key, even from the client that holds it', async function () {
      const bound = await aliceToken(web, aliceKey);
      const bare = await exchange('laundering-web', webSecret, { subject_token: bound, scope: 'profile' });
      expect(bare.status, JSON.stringify(bare.body)).to.equal(400);
      expect(bare.body).to.include({ error: 'invalid_grant' });
      expect(bare.body.error_description).to.match(/DPoP-bound/);
      const otherKey = await DpopKey.generate();
      const wrongKey = await exchange(
        'laundering-web',
        webSecret,
        { subject_token: bound, scope: 'profile' },
        { DPoP: await otherKey.proof('POST', tokenUrl) },
      );
      expect(wrongKey.status, JSON.stringify(wrongKey.body)).to.equal(400);
      expect(wrongKey.body.error_description).to.match(/not the key/);
    });

    it('exchanges a bound token with a proof of its key, and the new token stays bound to that key', async function () {
      const bound = await aliceToken(web, aliceKey);
      const { status, body } = await exchange(
        'laundering-web',
        webSecret,
        { subject_token: bound, scope: 'profile' },
        { DPoP: await aliceKey.proof('POST', tokenUrl) },
      );
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body.token_type).to.equal('DPoP');
      expect(await userinfoAsBearer(body.access_token), 'the exchanged token is bound too').to.equal(401);
    });

    it("refuses another client's unbound token unless may_act or a delegation names the client", async function () {
      const unbound = await aliceToken(spa);
      expect(await userinfoAsBearer(unbound)).to.equal(200);
      const { status, body } = await exchange('intruder', intruderSecret, {
        subject_token: unbound,
        scope: 'openid profile',
      });
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body.error).to.equal('invalid_grant');
      expect(body.error_description).to.match(/issued to another client/);
      const [entry] = (await server.admin('GET', '/audit-logs?endpoint=/token&size=1&sort=id,desc')).body.content;
      expect(entry.policyInput.subject_token).to.include({ client_id: 'spa' });
    });

    it('refuses an actor token of another client as the act of the issued token', async function () {
      const own = await aliceToken(web);
      const foreignActor = await clientToken(server, 'intruder', intruderSecret, { scope: 'read' });
      const { status, body } = await exchange('laundering-web', webSecret, {
        subject_token: own,
        scope: 'profile',
        actor_token: foreignActor,
        actor_token_type: ACCESS_TOKEN,
      });
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body.error_description).to.match(/actor token was issued to another client/);
    });

    it('refuses a resource nobody registered with invalid_target', async function () {
      const own = await aliceToken(web);
      const { status, body } = await exchange('laundering-web', webSecret, {
        subject_token: own,
        scope: 'profile',
        resource: 'https://attacker.example/api',
        resource_type: 'urn:as:introspect',
      });
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body.error).to.equal('invalid_target');
    });
  });

  describe('the UMA grant', function () {
    let pat: string;
    let photo: string;

    before(async function () {
      pat = await aliceToken(spa, undefined, { resource: 'urn:as:introspect', scope: 'openid uma_protection' });
      const created = await api(server, 'POST', '/resource_registration/resource', pat, {
        name: 'Beach',
        resource_scopes: ['view'],
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      photo = created.body._id;
    });

    const ticket = async () =>
      (await api(server, 'POST', '/permission', pat, { resource_id: photo, resource_scopes: ['view'] })).body
        .ticket as string;
    const redeem = async (claimToken: string, headers: Record<string, string> = {}) =>
      postForm(
        server,
        '/token',
        {
          grant_type: UMA_GRANT,
          ticket: await ticket(),
          claim_token: claimToken,
          claim_token_format: ACCESS_TOKEN_FORMAT,
        },
        { Authorization: basic('laundering-web', webSecret), ...headers },
      );

    it("refuses a claim token issued to another client (a resource server that received alice's token is not alice)", async function () {
      const { status, body } = await redeem(await aliceToken(spa));
      expect(status, JSON.stringify(body)).to.equal(400);
      expect(body.error).to.equal('invalid_grant');
      expect(body.error_description).to.match(/not issued to this client/);
    });

    it('refuses a DPoP-bound claim token without a proof of its key, and binds the RPT to the key when proven', async function () {
      const bound = await aliceToken(web, aliceKey);
      const bare = await redeem(bound);
      expect(bare.status, JSON.stringify(bare.body)).to.equal(400);
      expect(bare.body.error_description).to.match(/DPoP-bound/);
      const proven = await redeem(bound, { DPoP: await aliceKey.proof('POST', tokenUrl) });
      expect(proven.status, JSON.stringify(proven.body)).to.equal(200);
      expect(proven.body.token_type).to.equal('DPoP');
    });

    it("accepts the client's own unbound claim token", async function () {
      const { status, body } = await redeem(await aliceToken(web));
      expect(status, JSON.stringify(body)).to.equal(200);
      expect(body.token_type).to.equal('Bearer');
    });
  });
});
