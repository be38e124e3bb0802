import { expect } from 'chai';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  withSignInServer,
  type TestClient,
} from '../support/dev-idp.js';
import { clientWithToken, eventually } from '../support/oauth.js';
import type { TestServer } from '../support/server.js';
import { eventOf, pollSets, SetVerifier, type VerifiedSet } from '../support/ssf-receiver.js';

const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';

/** A user's own logout at /session/end is a CAEP session-revoked to the streams that cover them. */
describe('Shared Signals: a user logs out', function () {
  let server: TestServer;
  const unique = (name: string) => `${name}-${Math.random().toString(36).slice(2, 8)}`;

  before(async function () {
    ({ server } = await withSignInServer());
  });

  it('sends session-revoked (initiating_entity user) with the user as iss_sub once they log out at /session/end', async function () {
    const receiverId = unique('ssf-logout-receiver');
    const { token } = await clientWithToken(server, receiverId, ['ssf.manage']);
    const issuer = server.config.issuer;
    const created = await server.request('/ssf/streams', {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      json: { delivery: { method: 'urn:ietf:rfc:8936' }, events_requested: [SESSION_REVOKED] },
    });
    expect(created.status).to.equal(201);
    const stream = (await created.json()) as { stream_id: string; delivery: { endpoint_url: string } };
    const endpoint = stream.delivery.endpoint_url;

    const rp: TestClient = { clientId: unique('ssf-logout-rp'), redirectUri: 'http://127.0.0.1:1/ssf/cb' };
    const registered = await server.admin('POST', '/clients', {
      clientId: rp.clientId,
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      redirectUris: [rp.redirectUri],
      scopes: ['openid'],
    });
    expect(registered.status, JSON.stringify(registered.body)).to.equal(201);
    const request = await authorizationRequest(server, rp);
    const agent = new FetchUserAgent();
    const page = await agent.navigate(request.url, arrivingAt(rp.redirectUri));
    const landed = await passDevIdpForms(agent, page, unique('ssf-logout-ann'), arrivingAt(rp.redirectUri));
    const { body } = await redeemCode(server, rp, landed.url.searchParams.get('code')!, request.codeVerifier);
    const sub = JSON.parse(Buffer.from(body.id_token.split('.')[1], 'base64url').toString()).sub as string;
    const confirmation = await agent.navigate(
      `${issuer}/session/end?id_token_hint=${body.id_token}&client_id=${rp.clientId}`,
    );
    expect((await agent.submitForm(confirmation, { logout: 'yes' })).status).to.equal(200);

    const verifier = new SetVerifier(`${issuer}/.well-known/jwks.json`, issuer, receiverId);
    let sets: VerifiedSet[] = [];
    await eventually(async () => {
      sets = [...(await pollSets(endpoint, token, verifier)).sets.values()];
      return sets.some((set) => set.payload.sub_id?.sub === sub);
    });
    const set = sets.find((each) => each.payload.sub_id?.sub === sub)!;
    expect(set.payload.sub_id).to.deep.equal({ format: 'iss_sub', iss: issuer, sub });
    expect(eventOf(set)).to.deep.include({ type: SESSION_REVOKED });
    expect(eventOf(set).data).to.include({ initiating_entity: 'user' });
    const deleted = await server.request(`/ssf/streams?stream_id=${stream.stream_id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(deleted.status).to.equal(204);
  });
});
