import { expect } from 'chai';
import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { policyGatedGrant } from '../../../src/oauth/token/grants/gate.js';
import { knownScopes, type BuiltInGrant } from '../../../src/oauth/internals.js';
import { StubPolicyEngine } from '../../support/stub-policy.js';
import {
  bareProvider,
  fakeOidcContext,
  memoryStore,
  rejection,
  saveClient,
  saveResourceServer,
  saveSubject,
  TENANT,
} from '../../support/unit.js';

/** A built-in grant that records what it was handed and answers like oidc-provider's (an access token, the scope it got). */
function recordingGrant(grantType: string) {
  const handled: { scope: unknown; resource: unknown }[] = [];
  const builtIn: BuiltInGrant = {
    grantType,
    parameters: new Set(grantType === 'client_credentials' ? ['scope'] : ['code', 'redirect_uri', 'refresh_token']),
    async handle(ctx: KoaContextWithOIDC) {
      handled.push({ scope: ctx.oidc.params!.scope, resource: ctx.oidc.params!.resource });
      ctx.body = { access_token: 'issued', token_type: 'Bearer', authorization_details: [{ type: 'echoed' }] };
    },
  };
  return { builtIn, handled };
}

describe('unit: the policy-gated grants at /token (token/grants/gate)', function () {
  const store = memoryStore();
  let provider: Provider;
  let policy: StubPolicyEngine;

  before(async function () {
    provider = bareProvider();
    await saveClient(store(), 'unit-client', { scopes: ['read', 'write'] });
    await saveSubject(store(), 'alice', { email: 'alice@example.test' });
    await saveResourceServer(store(), 'https://api.example.test/', { typeUris: ['urn:example:api'] });
  });
  beforeEach(function () {
    policy = new StubPolicyEngine();
  });

  const gate = (grantType: 'client_credentials' | 'authorization_code' | 'refresh_token') => {
    const { builtIn, handled } = recordingGrant(grantType);
    const handler = policyGatedGrant(provider, builtIn, { store: store(), policy, tenant: TENANT });
    return { handler, handled };
  };

  /** A refresh token oidc-provider holds (its memory adapter), as a code or token redeemed here would be. */
  async function savedRefreshToken(fields: Record<string, unknown> = {}): Promise<string> {
    const grant = new provider.Grant({ accountId: 'alice', clientId: 'unit-client' });
    grant.addOIDCScope('openid');
    grant.addResourceScope('https://api.example.test/', 'read write');
    grant.addResourceScope('https://other.example.test/', 'admin');
    const grantId = await grant.save();
    const token = new provider.RefreshToken({
      accountId: 'alice',
      grantId,
      scope: 'openid read write',
      gty: 'authorization_code',
      client: { clientId: 'unit-client' } as never,
      ...fields,
    } as never);
    return token.save();
  }

  /** An authorization code oidc-provider holds, with its grant. */
  async function savedCode(scope: string): Promise<{ code: string; grantId: string }> {
    const grant = new provider.Grant({ accountId: 'alice', clientId: 'unit-client' });
    grant.addOIDCScope(scope);
    const grantId = await grant.save();
    const code = await new provider.AuthorizationCode({
      accountId: 'alice',
      grantId,
      scope,
      redirectUri: 'https://rp.test/cb',
      client: { clientId: 'unit-client' } as never,
    } as never).save();
    return { code, grantId };
  }

  describe('what every gated grant declares', function () {
    for (const grantType of ['client_credentials', 'authorization_code', 'refresh_token'] as const) {
      it(`${grantType} takes the built-in grant's parameters plus resource, authorization_details, resource types and scope, with resource repeatable`, function () {
        const { handler } = gate(grantType);
        expect(handler.grantType).to.equal(grantType);
        expect(handler.parameters).to.include.members(['resource', 'authorization_details', 'resource_types', 'scope']);
        expect(new Set(handler.parameters).size, 'no parameter twice').to.equal(handler.parameters.length);
        expect(handler.repeatable).to.deep.equal(['resource']);
      });
    }
  });

  describe('client_credentials', function () {
    it('asks the token point once, with the client record, the scopes asked and no subject', async function () {
      policy.answer('token', { allow: true, scopes: ['read'] });
      const { handler } = gate('client_credentials');
      await handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials', scope: 'read' } }));
      const input = policy.inputsAt('token')[0]!;
      expect(policy.asked).to.have.length(1);
      expect(input.tenant).to.equal(TENANT);
      expect(input.subject).to.equal(null);
      expect(input.client).to.include({ client_id: 'unit-client', authenticated_with: 'client_secret_basic' });
      expect(input.request.scopes).to.deep.equal(['read']);
      expect(input.request.grant_type).to.equal('client_credentials');
    });

    it('hands the built-in grant only the scopes the policy grants among those asked', async function () {
      policy.answer('token', { allow: true, scopes: ['read'] });
      const { handler, handled } = gate('client_credentials');
      await handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials', scope: 'read write' } }));
      expect(handled).to.deep.equal([{ scope: 'read', resource: undefined }]);
    });

    it('grants what the policy grants when the request asks for no scope', async function () {
      policy.answer('token', { allow: true, scopes: ['read', 'write'] });
      const { handler, handled } = gate('client_credentials');
      await handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials' } }));
      expect(handled[0]!.scope).to.equal('read write');
    });

    it('passes no scope on when the policy grants none of those asked (the token then carries none)', async function () {
      policy.answer('token', { allow: true, scopes: [] });
      const { handler, handled } = gate('client_credentials');
      await handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials', scope: 'write' } }));
      expect(handled[0]!.scope).to.equal(undefined);
    });

    it('makes oidc-provider recognize the granted scopes, so that it issues them', async function () {
      const scope = `unit-scope-${Date.now()}`;
      policy.answer('token', { allow: true, scopes: [scope] });
      const { handler } = gate('client_credentials');
      await handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials', scope } }));
      expect(knownScopes(provider).has(scope)).to.equal(true);
    });

    it("refuses a deny with the policy's error and description, and never reaches the built-in grant", async function () {
      policy.answer('token', { allow: false, error: 'invalid_scope', error_description: 'not for you' });
      const { handler, handled } = gate('client_credentials');
      const refused = await rejection(
        handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials', scope: 'admin' } })),
      );
      expect(refused).to.include({ error: 'invalid_scope', error_description: 'not for you', status: 400 });
      expect(handled).to.have.length(0);
    });

    it('refuses a deny that names no error as access_denied, "denied by policy"', async function () {
      policy.answer('token', { allow: false });
      const refused = await rejection(
        gate('client_credentials').handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials' } })),
      );
      expect(refused).to.include({ error: 'access_denied', error_description: 'denied by policy' });
    });

    it('answers an engine failure 503 temporarily_unavailable, not a deny', async function () {
      policy.answer('token', { engineError: 'OPA unreachable' });
      const { handler, handled } = gate('client_credentials');
      const refused = await rejection(
        handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials' } })),
      );
      expect(refused.status).to.equal(503);
      expect(refused.error).to.equal('temporarily_unavailable');
      expect(refused.error_description).to.match(/could not decide/);
      expect(handled).to.have.length(0);
    });

    it('keeps the decision on the state and in the audit entry', async function () {
      policy.answer('token', { allow: true, scopes: ['read'], obligations: { note: 1 } });
      const ctx = fakeOidcContext({ params: { grant_type: 'client_credentials', scope: 'read' }, audit: true });
      await gate('client_credentials').handler.handle(ctx);
      expect(ctx.state.policyDecision).to.deep.equal({ allow: true, scopes: ['read'], obligations: { note: 1 } });
      expect(ctx.state.audit).to.include({ outcome: 'allow', clientId: 'unit-client', subjectId: null });
    });

    it('records a deny as outcome deny and an engine failure as outcome error in the audit entry', async function () {
      policy.answerOnce('token', { allow: false }).answerOnce('token', { engineError: 'down' });
      const denied = fakeOidcContext({ params: { grant_type: 'client_credentials' }, audit: true });
      const failed = fakeOidcContext({ params: { grant_type: 'client_credentials' }, audit: true });
      await rejection(gate('client_credentials').handler.handle(denied));
      await rejection(gate('client_credentials').handler.handle(failed));
      expect(denied.state.audit?.outcome).to.equal('deny');
      expect(failed.state.audit?.outcome).to.equal('error');
    });

    it('refuses several resources with invalid_target before asking the policy', async function () {
      policy.answer('token', { allow: true });
      const refused = await rejection(
        gate('client_credentials').handler.handle(
          fakeOidcContext({
            params: { grant_type: 'client_credentials', resource: ['https://a.test/', 'https://b.test/'] },
          }),
        ),
      );
      expect(refused.error).to.equal('invalid_target');
      expect(refused.error_description).to.match(/one resource/);
      expect(policy.asked).to.have.length(0);
    });

    it('resolves a registered resource server to its type in the decision input', async function () {
      policy.answer('token', { allow: true, scopes: ['read'] });
      await gate('client_credentials').handler.handle(
        fakeOidcContext({
          params: { grant_type: 'client_credentials', scope: 'read', resource: 'https://api.example.test/' },
        }),
      );
      const input = policy.inputsAt('token')[0]!;
      expect(input.request.resource).to.equal('https://api.example.test/');
      expect(input.request.resolved_resource_type).to.equal('urn:example:api');
    });

    it("takes the caller's resource_type hint for an unregistered resource", async function () {
      policy.answer('token', { allow: true });
      await gate('client_credentials').handler.handle(
        fakeOidcContext({
          params: {
            grant_type: 'client_credentials',
            resource: 'https://unregistered.example.test/',
            resource_type: 'urn:hinted',
          },
        }),
      );
      expect(policy.inputsAt('token')[0]!.request.resolved_resource_type).to.equal('urn:hinted');
    });

    it('never shows the client secret to the policy', async function () {
      policy.answer('token', { allow: true });
      await gate('client_credentials').handler.handle(
        fakeOidcContext({ params: { grant_type: 'client_credentials', client_secret: 'hunter2' } }),
      );
      expect(JSON.stringify(policy.inputsAt('token')[0])).to.not.include('hunter2');
    });

    it('refuses an allow obliged to DPoP without a DPoP proof (invalid_dpop_proof)', async function () {
      policy.answer('token', { allow: true, obligations: { dpop_required: true } });
      const { handler, handled } = gate('client_credentials');
      const refused = await rejection(
        handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials' } })),
      );
      expect(refused.error).to.equal('invalid_dpop_proof');
      expect(handled).to.have.length(0);
    });

    it('lets an allow obliged to DPoP through when the request carries a proof', async function () {
      policy.answer('token', { allow: true, obligations: { dpop_required: true } });
      const { handler, handled } = gate('client_credentials');
      await handler.handle(
        fakeOidcContext({ params: { grant_type: 'client_credentials' }, headers: { DPoP: 'x.y.z' } }),
      );
      expect(handled).to.have.length(1);
    });

    it('answers a DPoP replay the built-in grant reports as invalid_grant as invalid_dpop_proof', async function () {
      policy.answer('token', { allow: true });
      const builtIn: BuiltInGrant = {
        grantType: 'client_credentials',
        parameters: new Set(),
        async handle() {
          throw Object.assign(new Error('invalid_grant'), {
            error: 'invalid_grant',
            error_description: 'grant request is invalid',
            error_detail: 'DPoP proof JWT Replay detected',
          });
        },
      };
      const handler = policyGatedGrant(provider, builtIn, { store: store(), policy, tenant: TENANT });
      const refused = await rejection(
        handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials' } })),
      );
      expect(refused.error).to.equal('invalid_dpop_proof');
    });

    it("passes on the built-in grant's other errors as they are", async function () {
      policy.answer('token', { allow: true });
      const own = Object.assign(new Error('invalid_client'), { error: 'invalid_client' });
      const builtIn: BuiltInGrant = {
        grantType: 'client_credentials',
        parameters: new Set(),
        handle: () => Promise.reject(own),
      };
      const handler = policyGatedGrant(provider, builtIn, { store: store(), policy, tenant: TENANT });
      expect(
        await rejection(handler.handle(fakeOidcContext({ params: { grant_type: 'client_credentials' } }))),
      ).to.equal(own);
    });

    it("replaces the authorization details the built-in grant echoed with the policy's", async function () {
      const granted = [{ type: 'payment_initiation', actions: ['initiate'] }];
      policy.answer('token', { allow: true, authorization_details: granted });
      const ctx = fakeOidcContext({ params: { grant_type: 'client_credentials' } });
      await gate('client_credentials').handler.handle(ctx);
      expect((ctx.body as Record<string, unknown>).authorization_details).to.deep.equal(granted);
    });

    it('leaves the answer as the built-in grant wrote it when the policy grants no authorization details', async function () {
      policy.answer('token', { allow: true, authorization_details: [] });
      const ctx = fakeOidcContext({ params: { grant_type: 'client_credentials' } });
      await gate('client_credentials').handler.handle(ctx);
      expect((ctx.body as Record<string, unknown>).authorization_details).to.deep.equal([{ type: 'echoed' }]);
    });
  });

  describe('authorization_code and refresh_token: what is redeemed', function () {
    it('an authorization_code request without code is invalid_request, before any lookup or decision', async function () {
      const refused = await rejection(
        gate('authorization_code').handler.handle(
          fakeOidcContext({ params: { grant_type: 'authorization_code', redirect_uri: 'https://rp.test/cb' } }),
        ),
      );
      expect(refused).to.include({ error: 'invalid_request' });
      expect(refused.error_description).to.match(/'code'/);
      expect(policy.asked).to.have.length(0);
    });

    it('an authorization_code request without redirect_uri is invalid_request', async function () {
      const refused = await rejection(
        gate('authorization_code').handler.handle(
          fakeOidcContext({ params: { grant_type: 'authorization_code', code: 'abc' } }),
        ),
      );
      expect(refused.error_description).to.match(/'redirect_uri'/);
    });

    it('a refresh_token request without refresh_token is invalid_request', async function () {
      const refused = await rejection(
        gate('refresh_token').handler.handle(fakeOidcContext({ params: { grant_type: 'refresh_token' } })),
      );
      expect(refused).to.include({ error: 'invalid_request' });
    });

    it('an unknown code is invalid_grant saying so, without a decision', async function () {
      const refused = await rejection(
        gate('authorization_code').handler.handle(
          fakeOidcContext({
            params: { grant_type: 'authorization_code', code: 'no-such-code', redirect_uri: 'https://rp.test/cb' },
          }),
        ),
      );
      expect(refused.error).to.equal('invalid_grant');
      expect(refused.error_description).to.equal('the authorization code is unknown or expired');
      expect(policy.asked).to.have.length(0);
    });

    it('an unknown refresh token is invalid_grant saying so', async function () {
      const refused = await rejection(
        gate('refresh_token').handler.handle(
          fakeOidcContext({ params: { grant_type: 'refresh_token', refresh_token: 'no-such-token' } }),
        ),
      );
      expect(refused.error_description).to.equal('the refresh token is unknown or expired');
    });

    it('a refresh asks the policy with the subject of the token and the scopes it carries when none are named', async function () {
      const refreshToken = await savedRefreshToken({ resource: 'https://api.example.test/' });
      policy.answer('token', { allow: true, scopes: ['openid', 'read', 'write'] });
      await gate('refresh_token').handler.handle(
        fakeOidcContext({ params: { grant_type: 'refresh_token', refresh_token: refreshToken } }),
      );
      const input = policy.inputsAt('token')[0]!;
      expect(input.subject).to.deep.equal({ sub: 'alice', idp: null, claims: { email: 'alice@example.test' } });
      expect(input.request.scopes).to.deep.equal(['openid', 'read', 'write']);
      expect(input.request.resource, 'the resource the token carries').to.equal('https://api.example.test/');
      expect(JSON.stringify(input)).to.not.include(refreshToken);
    });

    it('a refresh for scopes beyond those it holds is invalid_scope naming them, before the policy is asked', async function () {
      const refreshToken = await savedRefreshToken();
      const refused = await rejection(
        gate('refresh_token').handler.handle(
          fakeOidcContext({
            params: { grant_type: 'refresh_token', refresh_token: refreshToken, scope: 'read admin' },
          }),
        ),
      );
      expect(refused.error).to.equal('invalid_scope');
      expect(refused.error_description).to.match(/exceeds/);
      expect(policy.asked).to.have.length(0);
    });

    it('a refresh for fewer scopes asks for those, and hands the granted ones to the built-in grant', async function () {
      const refreshToken = await savedRefreshToken();
      policy.answer('token', { allow: true, scopes: ['read', 'write'] });
      const { handler, handled } = gate('refresh_token');
      await handler.handle(
        fakeOidcContext({ params: { grant_type: 'refresh_token', refresh_token: refreshToken, scope: 'read' } }),
      );
      expect(policy.inputsAt('token')[0]!.request.scopes).to.deep.equal(['read']);
      expect(handled[0]!.scope).to.equal('read');
    });

    it('a refresh the policy grants none of the asked scopes for is invalid_scope (never "everything it holds")', async function () {
      const refreshToken = await savedRefreshToken();
      policy.answer('token', { allow: true, scopes: [] });
      const { handler, handled } = gate('refresh_token');
      const refused = await rejection(
        handler.handle(
          fakeOidcContext({ params: { grant_type: 'refresh_token', refresh_token: refreshToken, scope: 'read' } }),
        ),
      );
      expect(refused.error).to.equal('invalid_scope');
      expect(refused.error_description).to.match(/grants none/);
      expect(handled).to.have.length(0);
    });

    it('a refresh naming a resource its token was not issued for is invalid_target', async function () {
      const refreshToken = await savedRefreshToken({ resource: 'https://api.example.test/' });
      const refused = await rejection(
        gate('refresh_token').handler.handle(
          fakeOidcContext({
            params: { grant_type: 'refresh_token', refresh_token: refreshToken, resource: 'https://elsewhere.test/' },
          }),
        ),
      );
      expect(refused.error).to.equal('invalid_target');
      expect(policy.asked).to.have.length(0);
    });

    it('a refresh token of several resources must be asked for one of them (invalid_target otherwise)', async function () {
      const refreshToken = await savedRefreshToken({
        resource: ['https://api.example.test/', 'https://other.example.test/'],
      });
      const refused = await rejection(
        gate('refresh_token').handler.handle(
          fakeOidcContext({ params: { grant_type: 'refresh_token', refresh_token: refreshToken } }),
        ),
      );
      expect(refused.error).to.equal('invalid_target');
      expect(refused.error_description).to.match(/several resources/);
    });

    it("a refresh token of several resources asked for one is decided on that resource's scopes alone", async function () {
      const refreshToken = await savedRefreshToken({
        resource: ['https://api.example.test/', 'https://other.example.test/'],
        scope: 'openid read write admin',
      });
      policy.answer('token', { allow: true, scopes: ['openid', 'admin'] });
      await gate('refresh_token').handler.handle(
        fakeOidcContext({
          params: { grant_type: 'refresh_token', refresh_token: refreshToken, resource: 'https://other.example.test/' },
        }),
      );
      const input = policy.inputsAt('token')[0]!;
      expect(input.request.scopes).to.deep.equal(['openid', 'admin']);
      expect(input.request.resource).to.equal('https://other.example.test/');
    });

    it('a refresh asking for authorization details it does not carry is invalid_authorization_details', async function () {
      const refreshToken = await savedRefreshToken({ rar: [{ type: 'account', actions: ['read'] }] });
      const refused = await rejection(
        gate('refresh_token').handler.handle(
          fakeOidcContext({
            params: {
              grant_type: 'refresh_token',
              refresh_token: refreshToken,
              authorization_details: JSON.stringify([{ type: 'account', actions: ['write'] }]),
            },
          }),
        ),
      );
      expect(refused.error).to.equal('invalid_authorization_details');
      expect(policy.asked).to.have.length(0);
    });

    it('a refresh asking for some of the authorization details it carries is decided', async function () {
      const carried = [
        { type: 'account', actions: ['read'] },
        { type: 'payment', amount: 5 },
      ];
      const refreshToken = await savedRefreshToken({ rar: carried });
      policy.answer('token', { allow: true, scopes: ['read'] });
      await gate('refresh_token').handler.handle(
        fakeOidcContext({
          params: {
            grant_type: 'refresh_token',
            refresh_token: refreshToken,
            authorization_details: JSON.stringify([carried[1]]),
          },
        }),
      );
      expect(policy.inputsAt('token')[0]!.request.authorization_details).to.deep.equal([carried[1]]);
    });

    it('a refresh without authorization_details is decided on those the token carries', async function () {
      const carried = [{ type: 'account', actions: ['read'] }];
      const refreshToken = await savedRefreshToken({ rar: carried });
      policy.answer('token', { allow: true, scopes: ['read'] });
      await gate('refresh_token').handler.handle(
        fakeOidcContext({ params: { grant_type: 'refresh_token', refresh_token: refreshToken } }),
      );
      expect(policy.inputsAt('token')[0]!.request.authorization_details).to.deep.equal(carried);
    });

    it('a code exchange asks for exactly the scopes the code carries, whatever the request says', async function () {
      const { code } = await savedCode('openid profile');
      policy.answer('token', { allow: true, scopes: ['openid', 'profile'] });
      await gate('authorization_code').handler.handle(
        fakeOidcContext({
          params: { grant_type: 'authorization_code', code, redirect_uri: 'https://rp.test/cb', scope: 'admin' },
        }),
      );
      expect(policy.inputsAt('token')[0]!.request.scopes).to.deep.equal(['openid', 'profile']);
      expect(JSON.stringify(policy.inputsAt('token')[0]), 'the code is a credential').to.not.include(code);
    });

    it('a code exchange the policy narrows takes the refused scopes out of the grant itself', async function () {
      const { code, grantId } = await savedCode('openid profile email');
      policy.answer('token', { allow: true, scopes: ['openid'] });
      await gate('authorization_code').handler.handle(
        fakeOidcContext({ params: { grant_type: 'authorization_code', code, redirect_uri: 'https://rp.test/cb' } }),
      );
      const grant = await provider.Grant.find(grantId);
      expect(grant?.getOIDCScope()).to.equal('openid');
    });

    it('a code exchange the policy grants in full leaves the grant as it is', async function () {
      const { code, grantId } = await savedCode('openid profile');
      policy.answer('token', { allow: true, scopes: ['openid', 'profile'] });
      await gate('authorization_code').handler.handle(
        fakeOidcContext({ params: { grant_type: 'authorization_code', code, redirect_uri: 'https://rp.test/cb' } }),
      );
      expect((await provider.Grant.find(grantId))?.getOIDCScope()).to.equal('openid profile');
    });

    for (const [what, value] of [
      ['not JSON', '{nope'],
      ['a JSON object, not an array', '{"type":"account"}'],
    ] as const) {
      it(`a refresh whose authorization_details is ${what} is invalid_authorization_details`, async function () {
        const refreshToken = await savedRefreshToken({ rar: [{ type: 'account' }] });
        const refused = await rejection(
          gate('refresh_token').handler.handle(
            fakeOidcContext({
              params: { grant_type: 'refresh_token', refresh_token: refreshToken, authorization_details: value },
            }),
          ),
        );
        expect(refused.error).to.equal('invalid_authorization_details');
        expect(refused.error_description).to.match(/JSON array/);
      });
    }
  });
});
