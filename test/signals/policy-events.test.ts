import { expect } from 'chai';
import {
  basic,
  clientCredentials,
  clientWithToken,
  confidentialClient,
  eventually,
  postForm,
} from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';
import { eventOf, PushReceiver, SetVerifier } from '../support/ssf-receiver.js';

const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const TOKEN_CLAIMS_CHANGE = 'https://schemas.openid.net/secevent/caep/event-type/token-claims-change';
const HOLD_PATH = 'arbiter/policy_events_hold.rego';

/**
 * Events from policy (src/signals/policy-changes.ts): once the revision in force moves on, the
 * live tokens' last introspection decisions are decided again, and the streams covering a token
 * now refused get a CAEP session-revoked; a change that refuses nothing signals nothing.
 */
describe('Shared Signals: events from policy', function () {
  let server: TestServer;
  let receiver: PushReceiver;
  let callerToken: string;
  const secrets: Record<string, string> = {};

  before(async function () {
    // Its own server: the test changes the shared policy.
    server = await readyServer({ OUTBOX_POLL_MS: '200' });
    const issuer = server.config.issuer;
    receiver = new PushReceiver();
    const pushUrl = await receiver.start();
    receiver.verifier = new SetVerifier(`${issuer}/.well-known/jwks.json`, issuer, 'ssf-policy-receiver');
    const { token } = await clientWithToken(server, 'ssf-policy-receiver', ['ssf.manage']);
    const created = await server.request('/ssf/streams', {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      json: {
        delivery: { method: 'urn:ietf:rfc:8935', endpoint_url: pushUrl },
        events_requested: [SESSION_REVOKED, TOKEN_CLAIMS_CHANGE],
      },
    });
    expect(created.status).to.equal(201);
    for (const app of [
      'policy-app',
      'policy-other-app',
      'policy-narrow-app',
      'policy-quiet-app',
      'policy-revoked-app',
      'policy-twin-app',
    ])
      secrets[app] = await confidentialClient(server, app, { scopes: ['read', 'write'] });
    ({ token: callerToken } = await clientWithToken(server, 'policy-rs', ['introspection']));
  });
  after(async function () {
    await receiver?.close();
    await server?.close();
  });

  /** A live token of `app`, introspected once (allowed): its decision is recorded. */
  async function liveToken(app: string, scope = 'read'): Promise<string> {
    const issued = await clientCredentials(server, app, secrets[app]!, { scope });
    expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
    const token = issued.body.access_token as string;
    expect((await introspect(token)).body.active).to.equal(true);
    return token;
  }
  const introspect = (token: string) =>
    postForm(server, '/introspect', { token }, { Authorization: `Bearer ${callerToken}` });

  /** Resolves once the outbox has run `count` more entries than `before` and holds none (the recheck is done). */
  async function outboxSettled(before: number, count: number): Promise<void> {
    await eventually(async () => {
      const { body } = await server.admin('GET', '/outbox');
      return body.delivered >= before + count && body.pending === 0;
    });
  }
  /** The SETs received from policy changes (the stream's own verification SETs left out). */
  const policySets = () =>
    receiver.received.filter((set) => [SESSION_REVOKED, TOKEN_CLAIMS_CHANGE].includes(eventOf(set).type));
  const delivered = async () => (await server.admin('GET', '/outbox')).body.delivered as number;

  it('signals nothing for a change that refuses no live token', async function () {
    await liveToken('policy-app');
    const before = await delivered();
    const hold = await server.admin('PUT', `/policy-rules/by-path?path=${HOLD_PATH}`, {
      version: null,
      kind: 'rego',
      content: 'package arbiter.policy_events_hold\n\nimport rego.v1\n\nblocked_clients := {"policy-app"}\n',
    });
    expect(hold.status, JSON.stringify(hold.body)).to.equal(201);
    await outboxSettled(before, 1);
    expect(policySets()).to.have.length(0);
  });

  it('pushes a verified session-revoked, about the client, for a live token the new revision refuses', async function () {
    const refused = await liveToken('policy-app');
    const kept = await liveToken('policy-other-app');
    const rules = (await server.admin('GET', '/policy-rules')).body as any[];
    const introspectRule = rules.find((rule) => rule.path.endsWith('introspect.rego'));
    const { id, createdAt, updatedAt, tenantId, ...fields } = introspectRule;
    const content = introspectRule.content.replace(
      'caller_entitled if {',
      'caller_entitled if {\n\tnot input.token.client_id in data.arbiter.policy_events_hold.blocked_clients',
    );
    // Before it is applied, impact analysis says what it would signal: policy-app's two live tokens, one stream.
    const impact = await server.admin('POST', '/policy-impact', {
      changes: [
        { collection: 'policy-rules', op: 'replace', record: { kind: 'rego', path: introspectRule.path, content } },
      ],
    });
    expect(impact.status, JSON.stringify(impact.body)).to.equal(200);
    expect(impact.body.signals).to.deep.equal({ liveTokens: 2, receivers: 1 });
    expect(policySets()).to.have.length(0);
    const guarded = await server.admin('PUT', `/policy-rules/${id}`, { ...fields, content });
    expect(guarded.status, JSON.stringify(guarded.body)).to.equal(200);
    await eventually(() => policySets().length > 0);
    const [set] = policySets();
    expect(set!.payload.sub_id).to.deep.equal({ format: 'opaque', id: 'policy-app' });
    expect(set!.header.typ).to.equal('secevent+jwt');
    expect(eventOf(set!).type).to.equal(SESSION_REVOKED);
    expect(eventOf(set!).data).to.include({ initiating_entity: 'policy' });
    // Live traffic agrees: the refused token is inactive now, the other one is not.
    await eventually(async () => (await introspect(refused)).body.active === false);
    expect((await introspect(kept)).body.active).to.equal(true);
    expect(policySets()).to.have.length(1);
  });

  it('pushes a verified token-claims-change with the claims now granted for a live token the new revision narrows', async function () {
    const narrowed = await liveToken('policy-narrow-app', 'read write');
    const rule = ((await server.admin('GET', '/policy-rules')).body as any[]).find((each) =>
      each.path.endsWith('introspect.rego'),
    );
    const { id, createdAt, updatedAt, tenantId, ...fields } = rule;
    const content = rule.content.replace(
      '{"allow": true, "scopes": input.token.scopes}',
      '{"allow": true, "scopes": [scope | some scope in input.token.scopes; scope != "write"]}',
    );
    expect(content).not.to.equal(rule.content);
    expect((await server.admin('PUT', `/policy-rules/${id}`, { ...fields, content })).status).to.equal(200);
    const narrower = () => policySets().filter((set) => eventOf(set).type === TOKEN_CLAIMS_CHANGE);
    await eventually(() => narrower().length > 0);
    const [set] = narrower();
    expect(set!.payload.sub_id).to.deep.equal({ format: 'opaque', id: 'policy-narrow-app' });
    expect(eventOf(set!).data).to.deep.include({ initiating_entity: 'policy', claims: { scope: 'read' } });
    // Live traffic agrees (once OPA has the new revision too).
    await eventually(async () => (await introspect(narrowed)).body.scope === 'read');
  });

  it('covers a live token never introspected, and leaves out one revoked since its last introspection', async function () {
    // Issued, never introspected: no recorded introspection names it.
    const quiet = await clientCredentials(server, 'policy-quiet-app', secrets['policy-quiet-app']!, { scope: 'read' });
    expect(quiet.status, JSON.stringify(quiet.body)).to.equal(200);
    // Introspected (allowed, recorded), then revoked by its client (RFC 7009).
    const revoked = await liveToken('policy-revoked-app');
    const revocation = await postForm(
      server,
      '/revoke',
      { token: revoked },
      { Authorization: basic('policy-revoked-app', secrets['policy-revoked-app']!) },
    );
    expect(revocation.status).to.equal(200);
    expect((await introspect(revoked)).body.active).to.equal(false);
    const sentBefore = policySets().length;
    // Both clients refused by the introspect rule of the test above (it reads the hold's list).
    const hold = ((await server.admin('GET', '/policy-rules')).body as any[]).find((rule) => rule.path === HOLD_PATH);
    const { id, createdAt, updatedAt, tenantId, ...fields } = hold;
    const content = hold.content.replace('{"policy-app"}', '{"policy-app", "policy-quiet-app", "policy-revoked-app"}');
    expect(content).not.to.equal(hold.content);
    const before = await delivered();
    expect((await server.admin('PUT', `/policy-rules/${id}`, { ...fields, content })).status).to.equal(200);
    const about = (clientId: string) =>
      policySets()
        .slice(sentBefore)
        .filter((set) => eventOf(set).type === SESSION_REVOKED && set.payload.sub_id?.id === clientId);
    // Before: only tokens with a recorded introspection were decided again, the revoked one among them.
    await eventually(() => about('policy-quiet-app').length > 0);
    await outboxSettled(before, 1);
    expect(about('policy-revoked-app'), 'a revoked token is not signalled').to.have.length(0);
  });
  it('counts each of two live tokens of one client issued within the same second', async function () {
    // No token value is recorded: both tokens have the same facts (client, iat, exp), one recorded decision.
    const issued: number[] = [];
    const issue = async () => {
      const token = await liveToken('policy-twin-app');
      issued.push((await introspect(token)).body.iat as number);
    };
    await issue();
    await issue();
    while (issued.at(-1) !== issued.at(-2) && issued.length < 20) await issue();
    expect(issued.at(-1), 'two tokens issued within one second').to.equal(issued.at(-2));
    const hold = ((await server.admin('GET', '/policy-rules')).body as any[]).find((rule) => rule.path === HOLD_PATH);
    const content = hold.content.replace('{"policy-app"', '{"policy-twin-app", "policy-app"');
    expect(content).not.to.equal(hold.content);
    const liveTokensSignalled = async (rule: string) => {
      const impact = await server.admin('POST', '/policy-impact', {
        changes: [
          { collection: 'policy-rules', op: 'replace', record: { kind: 'rego', path: HOLD_PATH, content: rule } },
        ],
      });
      expect(impact.status, JSON.stringify(impact.body)).to.equal(200);
      return impact.body.signals.liveTokens as number;
    };
    // Against their recorded decisions, the hold as it is counts the earlier tests' tokens; with
    // policy-twin-app refused, each of its tokens issued here counts too.
    expect(await liveTokensSignalled(content)).to.equal((await liveTokensSignalled(hold.content)) + issued.length);
  });
});
