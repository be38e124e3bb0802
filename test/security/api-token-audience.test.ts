import { expect } from 'chai';
import { clientToken, confidentialClient, postForm } from '../support/oauth.js';
import { inTenant, withServer, type TestServer } from '../support/server.js';

const TENANT = 'api-token-audience';
/** A resource server of the operator's, which the client hands the token it was issued for it. */
const ELSEWHERE = 'https://photos.example/';

/**
 * RFC 8707 §2 / RFC 9068 §4: a resource server takes only tokens issued for it. Arbiter's own APIs
 * are resource servers too: before, a token issued for another resource server (which the default
 * pack grants every scope the client holds, `authzen` and `delegation_management` included, when
 * the resource is no type of its own) was taken at AuthZEN, /delegation, /introspect and the SSF
 * API, so the resource server it was handed to could call them as the client or the user.
 */
describe("Arbiter's APIs take no token issued for another resource server", function () {
  let server: TestServer;
  let secret: string;

  before(async function () {
    server = inTenant(await withServer(), TENANT);
    secret = await confidentialClient(server, 'api-user', {
      scopes: ['authzen', 'delegation_management', 'introspection', 'ssf.read', 'ssf.manage'],
    });
  });

  const tokenFor = (scope: string, resource?: string) =>
    clientToken(server, 'api-user', secret, { scope, ...(resource ? { resource } : {}) });

  const calls: Record<string, { scope: string; own: string | null; call: (token: string) => Promise<number> }> = {
    AuthZEN: {
      scope: 'authzen',
      own: 'urn:as:authzen',
      call: async (token) =>
        (
          await server.request('/access/v1/evaluation', {
            method: 'POST',
            headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
            body: JSON.stringify({
              subject: { type: 'user', id: 'alice' },
              action: { name: 'read' },
              resource: { type: 'document', id: 'd1' },
            }),
          })
        ).status,
    },
    '/delegation': {
      scope: 'delegation_management',
      own: 'urn:as:delegation',
      call: async (token) =>
        (await server.request('/delegation', { headers: { Authorization: `Bearer ${token}` } })).status,
    },
    '/introspect': {
      scope: 'introspection',
      own: 'urn:as:introspect',
      call: async (token) =>
        (await postForm(server, '/introspect', { token: 'anything' }, { Authorization: `Bearer ${token}` })).status,
    },
    'the SSF API': {
      scope: 'ssf.read',
      own: null,
      call: async (token) =>
        (await server.request('/ssf/streams', { headers: { Authorization: `Bearer ${token}` } })).status,
    },
  };

  for (const [api, { scope, own, call }] of Object.entries(calls)) {
    it(`${api}: refuses a token with ${scope} issued for another resource server, takes one issued for none${own ? ` or for ${own}` : ''}`, async function () {
      const refused = await call(await tokenFor(scope, ELSEWHERE));
      // As a token without the scope: 401 invalid_token at /introspect, 403 insufficient_scope elsewhere.
      expect(refused, 'issued for another resource server').to.equal(api === '/introspect' ? 401 : 403);
      expect(await call(await tokenFor(scope)), 'issued for no resource server').to.equal(200);
      if (own) expect(await call(await tokenFor(scope, own)), `issued for ${own}`).to.equal(200);
    });
  }
});
