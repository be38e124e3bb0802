import { expect } from 'chai';
import {
  ACCESS_TOKEN_TYPE,
  exchangeParameters,
  ID_TOKEN_TYPE,
  TOKEN_EXCHANGE,
  TOKEN_EXCHANGE_PARAMETERS,
} from '../../../src/oauth/token/grants/token-exchange/parameters.js';
import { decideExchange } from '../../../src/oauth/token/grants/token-exchange/decision.js';
import { clientRecords } from '../../../src/catalog/index.js';
import { DELEGATIONS_COLLECTION } from '../../../src/delegation/index.js';
import { umaResources } from '../../../src/uma/index.js';
import { UNBOUND, type ResolvedSubject } from '../../../src/oauth/token/grants/token-exchange/subject.js';
import { StubPolicyEngine } from '../../support/stub-policy.js';
import { fakeOidcContext, memoryStore, rejection, saveClient, saveResourceServer, TENANT } from '../../support/unit.js';

const exchangeOf = (params: Record<string, unknown>) => exchangeParameters(fakeOidcContext({ params }));
const refusalOf = (params: Record<string, unknown>) => {
  try {
    exchangeOf(params);
  } catch (error) {
    return error as { error: string; error_description: string };
  }
  throw new Error('expected a refusal');
};
const SUBJECT = { subject_token: 'subject-token-value', subject_token_type: ACCESS_TOKEN_TYPE };

describe('unit: token exchange parameters (RFC 8693 §2.1, token-exchange/parameters)', function () {
  it('reads a minimal request: an access token asked for, no audience, no scopes, no actor', function () {
    expect(exchangeOf(SUBJECT)).to.deep.equal({
      subjectToken: 'subject-token-value',
      subjectTokenType: ACCESS_TOKEN_TYPE,
      requestedTokenType: ACCESS_TOKEN_TYPE,
      audience: null,
      scopes: [],
      actor: null,
    });
  });

  it('splits the scope parameter on spaces and drops empty entries', function () {
    expect(exchangeOf({ ...SUBJECT, scope: ' read  write ' }).scopes).to.deep.equal(['read', 'write']);
  });

  it('keeps the audience, and reads an empty audience as none', function () {
    expect(exchangeOf({ ...SUBJECT, audience: 'urn:api' }).audience).to.equal('urn:api');
    expect(exchangeOf({ ...SUBJECT, audience: '' }).audience).to.equal(null);
  });

  it('takes an ID token as the subject token', function () {
    expect(exchangeOf({ subject_token: 'x', subject_token_type: ID_TOKEN_TYPE }).subjectTokenType).to.equal(
      ID_TOKEN_TYPE,
    );
  });

  it('takes an actor token with its type', function () {
    expect(exchangeOf({ ...SUBJECT, actor_token: 'actor', actor_token_type: ID_TOKEN_TYPE }).actor).to.deep.equal({
      token: 'actor',
      tokenType: ID_TOKEN_TYPE,
    });
  });

  it('accepts requested_token_type access_token explicitly', function () {
    expect(exchangeOf({ ...SUBJECT, requested_token_type: ACCESS_TOKEN_TYPE }).requestedTokenType).to.equal(
      ACCESS_TOKEN_TYPE,
    );
  });

  const refusals: [string, Record<string, unknown>, RegExp][] = [
    ['without subject_token', { subject_token_type: ACCESS_TOKEN_TYPE }, /missing required parameter 'subject_token'/],
    ['without subject_token_type', { subject_token: 'x' }, /missing required parameter 'subject_token_type'/],
    [
      'with a refresh token as subject',
      { subject_token: 'x', subject_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' },
      /is not supported as a subject token/,
    ],
    [
      'with a SAML 2 assertion as subject',
      { subject_token: 'x', subject_token_type: 'urn:ietf:params:oauth:token-type:saml2' },
      /is not supported as a subject token/,
    ],
    [
      'with a JWT as subject',
      { subject_token: 'x', subject_token_type: 'urn:ietf:params:oauth:token-type:jwt' },
      /is not supported as a subject token/,
    ],
    [
      'with an unknown subject type',
      { subject_token: 'x', subject_token_type: 'urn:nope' },
      /is not a known token type/,
    ],
    [
      'asking for an ID token',
      { ...SUBJECT, requested_token_type: ID_TOKEN_TYPE },
      /ID tokens are issued only at sign-in/,
    ],
    [
      'asking for a JWT',
      { ...SUBJECT, requested_token_type: 'urn:ietf:params:oauth:token-type:jwt' },
      /opaque, not JWTs/,
    ],
    [
      'asking for a refresh token',
      { ...SUBJECT, requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' },
      /never issues a refresh token/,
    ],
    [
      'asking for an unknown token type',
      { ...SUBJECT, requested_token_type: 'urn:other' },
      /not a token type this server issues/,
    ],
    ['with an actor token without its type', { ...SUBJECT, actor_token: 'a' }, /without 'actor_token_type'/],
    ['with an actor type without its token', { ...SUBJECT, actor_token_type: ID_TOKEN_TYPE }, /without 'actor_token'/],
    [
      'with an actor token of an unsupported type',
      { ...SUBJECT, actor_token: 'a', actor_token_type: 'urn:ietf:params:oauth:token-type:saml1' },
      /actor_token_type .* is not supported/,
    ],
    ['with subject_token given twice', { ...SUBJECT, subject_token: ['a', 'b'] }, /'subject_token' must be given once/],
    ['with audience given twice', { ...SUBJECT, audience: ['a', 'b'] }, /'audience' must be given once/],
  ];
  for (const [what, params, description] of refusals) {
    it(`refuses a request ${what} as invalid_request`, function () {
      const refused = refusalOf(params);
      expect(refused.error).to.equal('invalid_request');
      expect(refused.error_description).to.match(description);
    });
  }

  it('cuts a long unknown token type to 100 characters in the description', function () {
    const refused = refusalOf({ subject_token: 'x', subject_token_type: `urn:${'x'.repeat(5000)}` });
    expect(refused.error_description.length).to.be.below(400);
  });

  it('declares every parameter it reads, and the RFC 8693 grant type', function () {
    expect(TOKEN_EXCHANGE).to.equal('urn:ietf:params:oauth:grant-type:token-exchange');
    for (const name of ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type', 'audience'])
      expect(TOKEN_EXCHANGE_PARAMETERS).to.include(name);
  });
});

describe('unit: the token_exchange decision (token-exchange/decision)', function () {
  const store = memoryStore();
  let policy: StubPolicyEngine;
  before(async function () {
    await saveClient(store(), 'exchanger', { scopes: ['read', 'write'] });
    // The resource server authenticates as rs-client, which registered the UMA resource r1 there.
    await saveClient(store(), 'rs-client');
    const rsClient = (await clientRecords(store(), TENANT).findOne({ clientId: 'rs-client' }))!;
    await saveResourceServer(store(), 'https://rs.example.test/', {
      typeUris: ['urn:example:rs'],
      clientId: rsClient.id,
    });
    const resource = (id: string, ownerClientId: string) => ({
      id,
      name: null,
      type: null,
      resourceScopes: ['read'],
      description: null,
      iconUri: null,
      ownerSub: 'alice',
      ownerClientId,
      createdAt: new Date().toISOString(),
    });
    await umaResources(store(), TENANT).insertMany([resource('r1', 'rs-client'), resource('r2', 'elsewhere-rs')]);
  });
  beforeEach(function () {
    policy = new StubPolicyEngine();
  });

  const subjectToken = (fields: Partial<ResolvedSubject['token']> = {}): ResolvedSubject => ({
    token: {
      token_type: ACCESS_TOKEN_TYPE,
      active: true,
      iss: 'http://127.0.0.1:1',
      sub: 'alice',
      client_id: 'other-client',
      scopes: ['read', 'write'],
      resource: 'https://rs.example.test/',
      exp: 2_000_000_000,
      ...fields,
    },
    subject: { sub: 'alice', idp: null, claims: {} },
    binding: UNBOUND,
  });
  const exchangeOf = (
    params: Record<string, unknown>,
    resolved = subjectToken(),
    actor: ResolvedSubject | null = null,
  ) => {
    const ctx = fakeOidcContext({
      params: { grant_type: TOKEN_EXCHANGE, ...SUBJECT, ...params },
      client: { clientId: 'exchanger', clientAuthMethod: 'client_secret_basic' },
    });
    return decideExchange(ctx, { store: store(), policy, tenant: TENANT }, exchangeParameters(ctx), resolved, actor);
  };
  const decide = (params: Record<string, unknown>, resolved = subjectToken(), actor: ResolvedSubject | null = null) =>
    exchangeOf(params, resolved, actor).then(({ outcome }) => outcome);

  it("ties the exchange of another client's token to the delegations of its user to the client, and no other exchange", async function () {
    const delegation = (id: string, ownerSub: string, granteeClientId: string, resourceId = 'r1') => ({
      id,
      ownerSub,
      ownerClientId: 'other-client',
      granteeType: 'client' as const,
      granteeSubjectId: null,
      granteeClientId,
      resourceId,
      scopes: ['read'],
      validUntil: null,
      createdAt: new Date().toISOString(),
      revokedAt: null,
    });
    await store()
      .collection(DELEGATIONS_COLLECTION, TENANT)
      .insertMany([
        delegation('d-alice', 'alice', 'exchanger'),
        delegation('d-bob', 'bob', 'exchanger'),
        delegation('d-elsewhere', 'alice', 'another-client'),
        // Found 2026-11-29: a delegation on a resource of another resource server counted too.
        delegation('d-other-server', 'alice', 'exchanger', 'r2'),
      ]);
    policy.answer('token_exchange', { allow: true, scopes: ['read'] });
    expect((await exchangeOf({})).delegations).to.deep.equal(['d-alice']);
    expect(
      policy.inputsAt('token_exchange')[0]!.delegations!.map((grant) => grant.delegation_id),
      'given to the policy: those on resources of the target',
    ).to.deep.equal(['d-alice']);
    const own = subjectToken({ client_id: 'exchanger' });
    expect((await exchangeOf({}, own)).delegations, 'its own token').to.deep.equal([]);
    const named = subjectToken({ may_act: { client_id: 'exchanger' } });
    expect((await exchangeOf({}, named)).delegations, 'may_act names it').to.deep.equal([]);
  });

  it("asks token_exchange with the client, the subject, the subject token and no actor, for the token's own scopes and resource", async function () {
    policy.answer('token_exchange', { allow: true, scopes: ['read'] });
    const outcome = await decide({});
    expect(outcome.decision.allow).to.equal(true);
    const input = policy.inputsAt('token_exchange')[0]!;
    expect(input.client).to.include({ client_id: 'exchanger' });
    expect(input.subject).to.deep.equal({ sub: 'alice', idp: null, claims: {} });
    expect(input.subject_token).to.include({ client_id: 'other-client', sub: 'alice' });
    expect(input.actor_token).to.equal(null);
    expect(input.request.grant_type).to.equal(TOKEN_EXCHANGE);
    expect(input.request.scopes).to.deep.equal(['read', 'write']);
    expect(JSON.stringify(input), 'the subject token is a credential').to.not.include('subject-token-value');
  });

  it('asks for the scopes named when they are within the subject token', async function () {
    policy.answer('token_exchange', { allow: true });
    await decide({ scope: 'read' });
    expect(policy.inputsAt('token_exchange')[0]!.request.scopes).to.deep.equal(['read']);
  });

  it("refuses scopes beyond an access token's own as invalid_grant naming them, before the policy", async function () {
    const refused = await rejection(decide({ scope: 'read admin' }));
    expect(refused.error).to.equal('invalid_grant');
    expect(refused.error_description).to.match(/exceeds the subject token's scopes: admin$/);
    expect(policy.asked).to.have.length(0);
  });

  it('lets an ID token ask for scopes it does not carry (it carries none), and asks none when none are named', async function () {
    policy.answer('token_exchange', { allow: true });
    await decide({}, subjectToken({ token_type: ID_TOKEN_TYPE, scopes: [] }));
    await decide({ scope: 'read' }, subjectToken({ token_type: ID_TOKEN_TYPE, scopes: [] }));
    const [none, named] = policy.inputsAt('token_exchange');
    expect(none!.request.scopes).to.deep.equal([]);
    expect(named!.request.scopes).to.deep.equal(['read']);
  });

  it('passes the actor token on to the decision', async function () {
    policy.answer('token_exchange', { allow: true });
    const actor = subjectToken({ sub: 'agent', client_id: 'agent-client' });
    await decide({}, subjectToken(), actor);
    expect(policy.inputsAt('token_exchange')[0]!.actor_token).to.include({ sub: 'agent' });
  });

  it("a deny is the policy's error", async function () {
    policy.answer('token_exchange', { allow: false, error: 'invalid_target', error_description: 'no' });
    const refused = await rejection(decide({}));
    expect(refused).to.include({ error: 'invalid_target', error_description: 'no' });
  });

  it('an engine failure is a 503', async function () {
    policy.answer('token_exchange', { engineError: 'timeout' });
    expect((await rejection(decide({}))).status).to.equal(503);
  });

  it('takes an audience alone as the resource, resolved to its type', async function () {
    policy.answer('token_exchange', { allow: true });
    await decide({ audience: 'https://rs.example.test/' }, subjectToken({ resource: null }));
    const { request } = policy.inputsAt('token_exchange')[0]!;
    expect(request.resource).to.equal('https://rs.example.test/');
    expect(request.resolved_resource_type).to.equal('urn:example:rs');
  });

  it("accepts an audience that names the resource's type", async function () {
    policy.answer('token_exchange', { allow: true });
    await decide({ resource: 'https://rs.example.test/', audience: 'urn:example:rs' });
    expect(policy.asked).to.have.length(1);
  });

  it('refuses an audience that is another target than the resource (invalid_target)', async function () {
    const refused = await rejection(decide({ resource: 'https://rs.example.test/', audience: 'urn:elsewhere' }));
    expect(refused.error).to.equal('invalid_target');
    expect(refused.error_description).to.match(/not the requested resource/);
    expect(policy.asked).to.have.length(0);
  });

  it('refuses a resource nobody registered (invalid_target), never asking the policy', async function () {
    const refused = await rejection(decide({ resource: 'https://unknown.example.test/' }));
    expect(refused.error).to.equal('invalid_target');
    expect(refused.error_description).to.match(/not registered at this server/);
    expect(policy.asked).to.have.length(0);
  });

  it("accepts the subject token's own resource even when it is not registered", async function () {
    policy.answer('token_exchange', { allow: true });
    await decide({ resource: 'https://own.example.test/' }, subjectToken({ resource: 'https://own.example.test/' }));
    expect(policy.asked).to.have.length(1);
  });

  it('accepts a resource named as a resource type in policy data', async function () {
    policy.answer('token_exchange', { allow: true });
    policy.data.set('oauth', { resource_types: { 'urn:data:type': { scopes: ['read'] } } });
    await decide({ resource: 'urn:data:type' });
    expect(policy.inputsAt('token_exchange')[0]!.request.resource).to.equal('urn:data:type');
  });

  it('uses the resource_type hint for a resource registered without a type', async function () {
    policy.answer('token_exchange', { allow: true });
    await decide(
      { resource: 'https://own.example.test/', resource_type: 'urn:hint' },
      subjectToken({ resource: 'https://own.example.test/' }),
    );
    expect(policy.inputsAt('token_exchange')[0]!.request.resolved_resource_type).to.equal('urn:hint');
  });

  it('records the decision on the state', async function () {
    policy.answer('token_exchange', { allow: true, scopes: ['read'] });
    const ctx = fakeOidcContext({
      params: { grant_type: TOKEN_EXCHANGE, ...SUBJECT },
      client: { clientId: 'exchanger' },
      audit: true,
    });
    await decideExchange(
      ctx,
      { store: store(), policy, tenant: TENANT },
      exchangeParameters(ctx),
      subjectToken(),
      null,
    );
    expect(ctx.state.policyDecision).to.deep.equal({ allow: true, scopes: ['read'] });
    expect(ctx.state.audit).to.include({ outcome: 'allow', clientId: 'exchanger', subjectId: 'alice' });
  });
});
