import { expect } from 'chai';
import { introspectionBody, isSingleUse, INACTIVE } from '../../../src/oauth/introspect/response.js';
import { decideIntrospection, resourceOf } from '../../../src/oauth/introspect/decide.js';
import { StubPolicyEngine } from '../../support/stub-policy.js';
import type { TokenModel } from '../../../src/oauth/state.js';
import {
  fakeOidcContext,
  memoryStore,
  saveClient,
  saveResourceServer,
  saveSubject,
  TENANT,
} from '../../support/unit.js';

const ISSUER = 'http://127.0.0.1:1';
const token = (fields: Record<string, unknown> = {}): TokenModel => ({
  kind: 'AccessToken',
  isValid: true,
  clientId: 'rs-client',
  scope: 'read write',
  exp: 1_900_000_000,
  iat: 1_899_999_000,
  ...fields,
});

describe('unit: the introspection response (introspect/response, RFC 7662 §2.2)', function () {
  const store = memoryStore();
  before(async function () {
    await saveSubject(store(), 'alice', { preferredUsername: 'alice.l' });
  });
  const body = (
    model: TokenModel,
    decision = { allow: true } as Parameters<typeof introspectionBody>[4],
    types: string[] = [],
  ) => introspectionBody(store(), TENANT, ISSUER, model, decision, types);

  it('answers an active client token with its own facts, the issuer, and Bearer, leaving out what it lacks', async function () {
    expect(await body(token())).to.deep.equal({
      active: true,
      scope: 'read write',
      client_id: 'rs-client',
      token_type: 'Bearer',
      exp: 1_900_000_000,
      iat: 1_899_999_000,
      iss: ISSUER,
    });
  });

  it("shows a user's token's subject with the username of its record", async function () {
    expect(await body(token({ accountId: 'alice' }))).to.include({ sub: 'alice', username: 'alice.l' });
  });

  it('shows no username for a subject without a record', async function () {
    const answered = await body(token({ accountId: 'nobody' }));
    expect(answered).to.include({ sub: 'nobody' });
    expect(answered).to.not.have.property('username');
  });

  it('narrows the scopes to those the decision names, never widening them', async function () {
    expect((await body(token(), { allow: true, scopes: ['read', 'admin'] })).scope).to.equal('read');
  });

  it('leaves scope out when the decision keeps none of them', async function () {
    expect(await body(token(), { allow: true, scopes: [] })).to.not.have.property('scope');
  });

  it('says DPoP and the key thumbprint for a DPoP-bound token (RFC 9449 §6.2)', async function () {
    expect(await body(token({ jkt: 'thumb' }))).to.deep.include({ token_type: 'DPoP', cnf: { jkt: 'thumb' } });
  });

  it('shows the audience as issued, one or several, and the first as resource', async function () {
    expect(await body(token({ aud: 'https://rs.test/' }))).to.include({
      aud: 'https://rs.test/',
      resource: 'https://rs.test/',
    });
    expect(await body(token({ aud: ['https://a.test/', 'https://b.test/'] }))).to.deep.include({
      aud: ['https://a.test/', 'https://b.test/'],
      resource: 'https://a.test/',
    });
  });

  it('shows the resource types when there are any', async function () {
    expect(await body(token(), { allow: true }, ['urn:t'])).to.deep.include({ resource_types: ['urn:t'] });
    expect(await body(token(), { allow: true }, [])).to.not.have.property('resource_types');
  });

  it("prefers the decision's obligations and extensions to those kept at issuance", async function () {
    const issued = token({ extra: { obligations: { at: 'issuance' }, extensions: { e: 1 } } });
    expect(await body(issued)).to.deep.include({ obligations: { at: 'issuance' }, extensions: { e: 1 } });
    expect(await body(issued, { allow: true, obligations: { at: 'now' } })).to.deep.include({
      obligations: { at: 'now' },
    });
  });

  it('shows the authorization details as issued, and none when empty', async function () {
    const details = [{ type: 'payment', amount: 3 }];
    expect(await body(token({ rar: details }))).to.deep.include({ authorization_details: details });
    expect(await body(token({ rar: [] }))).to.not.have.property('authorization_details');
  });

  it('shows the act claim of an exchanged token', async function () {
    expect(await body(token({ extra: { act: { sub: 'agent' } } }))).to.deep.include({ act: { sub: 'agent' } });
  });

  it("shows a requesting party token's permissions still in force, with their end", async function () {
    const now = Math.floor(Date.now() / 1000);
    const rpt = token({
      exp: now + 600,
      extra: {
        permissions: [
          { resource_id: 'a', resource_scopes: ['view'] },
          { resource_id: 'gone', resource_scopes: ['view'], exp: now - 5 },
        ],
      },
    });
    expect((await body(rpt)).permissions).to.deep.equal([
      { resource_id: 'a', resource_scopes: ['view'], exp: now + 600 },
    ]);
  });

  it('never shows a null or undefined member', async function () {
    const answered = await body(token({ accountId: undefined, aud: null, exp: null }));
    expect(Object.values(answered).every((value) => value !== null && value !== undefined)).to.equal(true);
  });

  it('an inactive answer is exactly { active: false } (RFC 7662 §2.2)', function () {
    expect(INACTIVE).to.deep.equal({ active: false });
  });

  it('a token is single use when the decision says so now, or said so at issuance', function () {
    expect(isSingleUse(token(), { allow: true, jit_single_use: true })).to.equal(true);
    expect(isSingleUse(token({ extra: { jit_single_use: true } }), { allow: true })).to.equal(true);
    expect(isSingleUse(token(), { allow: true })).to.equal(false);
    expect(isSingleUse(token(), { allow: true, jit_single_use: false })).to.equal(false);
  });

  it('resourceOf is the audience, else the resource, the first of several, or null', function () {
    expect(resourceOf(token({ aud: 'https://a.test/' }))).to.equal('https://a.test/');
    expect(resourceOf(token({ resource: 'https://r.test/' }))).to.equal('https://r.test/');
    expect(resourceOf(token({ aud: ['https://a.test/', 'https://b.test/'] }))).to.equal('https://a.test/');
    expect(resourceOf(token({ aud: [] }))).to.equal(null);
    expect(resourceOf(token())).to.equal(null);
  });
});

describe('unit: the introspect decision (introspect/decide)', function () {
  const store = memoryStore();
  before(async function () {
    await saveClient(store(), 'rs-caller', { id: 900 });
    await saveResourceServer(store(), 'https://rs.example.test/', { clientId: 900, typeUris: ['urn:rs'] });
  });

  const decide = async (model: TokenModel, body: Record<string, string> = {}) => {
    const policy = new StubPolicyEngine().answer('introspect', { allow: true });
    const ctx = fakeOidcContext({ path: '/introspect', audit: true });
    ctx.state.body = body;
    const outcome = await decideIntrospection(ctx as never, { store: store(), policy, issuer: ISSUER }, TENANT, model, {
      clientId: 'rs-caller',
      method: 'client_secret_basic',
      scopes: [],
    });
    return { outcome, input: policy.inputsAt('introspect')[0]!, ctx };
  };

  it('tells the policy the token, its audiences, and the caller with the resource server it fronts', async function () {
    const { input } = await decide(token({ aud: 'https://rs.example.test/', accountId: 'alice' }));
    expect(input.token).to.deep.include({
      active: true,
      token_type: 'access_token',
      client_id: 'rs-client',
      sub: 'alice',
      scopes: ['read', 'write'],
      resource: 'https://rs.example.test/',
      audiences: ['https://rs.example.test/'],
      resource_types: ['urn:rs'],
      cnf_jkt: null,
    });
    expect(input.caller).to.deep.equal({
      method: 'client_secret_basic',
      scopes: [],
      resource_server: { resource_indicator: 'https://rs.example.test/', type_uris: ['urn:rs'], capability: {} },
      resource_indicators: ['https://rs.example.test/'],
    });
    expect(input.subject).to.include({ sub: 'alice' });
  });

  it("does not count this server's own issuers among a token's audiences", async function () {
    // The default tenant has one issuer (no /t/ path of its own).
    const { input } = await decide(token({ aud: [ISSUER, 'https://rs.example.test/'] }));
    expect((input.token as { audiences: string[] }).audiences).to.deep.equal(['https://rs.example.test/']);
  });

  it('tells a refresh token as refresh_token', async function () {
    const { input } = await decide(token({ kind: 'RefreshToken' }));
    expect((input.token as { token_type: string }).token_type).to.equal('refresh_token');
  });

  it("passes the resource server's context parameter and token_type_hint on", async function () {
    const { input } = await decide(token(), { context: '{"ip":"10.0.0.1"}', token_type_hint: 'access_token' });
    expect(input.context).to.deep.equal({ ip: '10.0.0.1' });
    expect(input.request.parameters).to.deep.include({ token_type_hint: 'access_token' });
  });

  it('records the decision for the audit entry', async function () {
    const { ctx } = await decide(token());
    expect(ctx.state.audit?.outcome).to.equal('allow');
    expect(ctx.state.policyDecision).to.deep.equal({ allow: true });
  });
});
