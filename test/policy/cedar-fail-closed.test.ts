import { expect } from 'chai';
import { clientCredentials, confidentialClient, eventually, type JsonResponse } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';
import { POLICY_DATA } from '../../src/policy/index.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';

/**
 * Cedar entity data (policy data `cedar.entities`) that Cedar cannot read fails every decision
 * closed (503 temporarily_unavailable at /token, engineError in the audit log) instead of being
 * left out: without it a permit would still allow, and a forbid that names a group would no
 * longer see who is in it. The Admin API refuses such data (its trial of the bundle finds that
 * Cedar cannot decide), so it is written to the store directly, as an older node or a restored
 * backup might have left it. Through real HTTP: Admin API writes, POST /token, the audit log.
 */
describe('Cedar fails closed on policy data it cannot convert', function () {
  const CLIENT = 'cedar-svc';
  const RULE_PATH = 'arbiter/clients.cedar';
  const RULES = `
@id("confidential-clients-get-tokens")
permit (principal is Arbiter::Client, action == Arbiter::Action::"token", resource)
when { context.client.client_type == "confidential" };

@id("suspended-clients-get-nothing")
@error("access_denied")
@error_description("this client is suspended")
forbid (principal in Arbiter::Group::"suspended", action == Arbiter::Action::"token", resource);
`;
  const client = { type: 'Arbiter::Client', id: CLIENT };
  const suspended = { type: 'Arbiter::Group', id: 'suspended' };

  let server: TestServer;
  let secret: string;

  before(async function () {
    // Its own server: Cedar rules and cedar.entities apply to every decision of the server.
    server = await readyServer();
    secret = await confidentialClient(server, CLIENT, { scopes: ['read'] });
    const rule = await server.admin('PUT', `/policy-rules/by-path?path=${RULE_PATH}`, {
      version: null,
      kind: 'cedar',
      path: RULE_PATH,
      content: RULES,
    });
    expect(rule.status, JSON.stringify(rule.body)).to.be.oneOf([200, 201]);
  });
  after(async function () {
    await server?.close();
  });

  const token = () => clientCredentials(server, CLIENT, secret, { scope: 'read' });

  async function setEntities(value: unknown): Promise<void> {
    const saved = await server.admin('PUT', '/policy-data/by-key?dataKey=cedar.entities', {
      dataKey: 'cedar.entities',
      payload: JSON.stringify(value),
    });
    expect(saved.status, JSON.stringify(saved.body)).to.be.oneOf([200, 201]);
  }

  /** Entity data Cedar cannot read: refused by the Admin API (400, nothing stored), then written to the store directly. */
  async function setUnreadableEntities(value: unknown): Promise<void> {
    const refused = await server.admin('PUT', '/policy-data/by-key?dataKey=cedar.entities', {
      dataKey: 'cedar.entities',
      payload: JSON.stringify(value),
    });
    expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
    expect(refused.body.error_description)
      .to.match(/Cedar cannot decide \w+ on the contract example "[\w-]+"/)
      .and.contain('Cedar entities in policy data cedar.entities cannot be converted');
    const data = server.store.collection(POLICY_DATA, DEFAULT_TENANT);
    const stored = await data.findOne({ dataKey: 'cedar.entities' });
    expect(stored, 'the readable entities written before').to.not.equal(null);
    await data.upsert({ ...stored!, payload: JSON.stringify(value), updatedAt: new Date().toISOString() });
  }

  /** The token answer once the data just written is in force (Cedar re-reads it within POLICY_POLL_MIN_SECONDS). */
  async function tokenOnceStatusIs(status: number): Promise<JsonResponse> {
    let last: JsonResponse | undefined;
    try {
      await eventually(async () => (last = await token()).status === status, 8_000);
    } catch {
      throw new Error(`expected ${status} from /token, still ${last?.status}: ${JSON.stringify(last?.body)}`);
    }
    return last!;
  }

  async function lastTokenAudit(): Promise<any> {
    const page = await server.admin('GET', `/audit-logs?endpoint=/token&clientId=${CLIENT}&size=1&sort=id,desc`);
    return page.body.content[0];
  }

  async function expectFailedClosed(): Promise<void> {
    const refused = await tokenOnceStatusIs(503);
    expect(refused.body.error).to.equal('temporarily_unavailable');
    expect(refused.body).not.to.have.property('access_token');
    const entry = await lastTokenAudit();
    expect(entry.outcome).to.equal('error');
    expect(entry.policyDecision.allow).to.equal(false);
    expect(entry.policyDecision.engines.cedar).to.equal('error');
    expect(entry.policyDecision.engineError).to.match(
      /^Cedar entities in policy data cedar\.entities cannot be converted/,
    );
  }

  it('with readable entity data, the permit allows and the group forbid denies (the baseline)', async function () {
    await setEntities([]);
    // Until Cedar has read the new rule, Rego alone decides (cedar: none).
    await eventually(
      async () => (await token()).status === 200 && (await lastTokenAudit()).policyDecision.engines.cedar === 'allow',
      8_000,
    );
    const entry = await lastTokenAudit();
    expect(entry.policyDecision.engines).to.deep.include({
      rego: 'allow',
      cedar: 'allow',
      cedarPolicies: ['confidential-clients-get-tokens'],
    });
    expect(entry.policyDecision.scopes).to.deep.equal(['read']);

    await setEntities([{ uid: client, attrs: {}, parents: [suspended] }]);
    const denied = await tokenOnceStatusIs(400);
    expect(denied.body).to.include({ error: 'access_denied', error_description: 'this client is suspended' });
  });

  it('fails closed, rather than letting the permit allow, when cedar.entities is not a Cedar entities array', async function () {
    await setEntities([]);
    await tokenOnceStatusIs(200);

    // Entities keyed by name instead of listed: Cedar cannot read this.
    await setUnreadableEntities({ [`${client.type}::${client.id}`]: { attrs: {}, parents: [suspended] } });
    await expectFailedClosed();
  });

  it('fails closed when a group membership a forbid depends on cannot be read, instead of skipping it', async function () {
    const member = { uid: client, attrs: {}, parents: [suspended] };
    const unreadable = [
      // The same entity twice, once with and once without the membership: neither may be dropped silently.
      [member, { uid: client, attrs: {}, parents: [] }],
      // The membership written as an entity string, which Cedar does not accept.
      [{ uid: client, attrs: {}, parents: ['Arbiter::Group::"suspended"'] }],
    ];
    for (const entities of unreadable) {
      await setEntities([member]);
      expect((await tokenOnceStatusIs(400)).body.error_description).to.equal('this client is suspended');

      await setUnreadableEntities(entities);
      await expectFailedClosed();
    }
  });

  it('applies a forbid whatever its @id, __proto__ too (it was left out of the policy set Cedar got)', async function () {
    await setEntities([]);
    await tokenOnceStatusIs(200);
    const path = 'arbiter/proto.cedar';
    // Its id was a key of a plain object: __proto__ set the object's prototype, and Cedar never got the forbid.
    const rule = await server.admin('PUT', `/policy-rules/by-path?path=${path}`, {
      version: null,
      kind: 'cedar',
      path,
      content: `
@id("__proto__")
@error("access_denied")
@error_description("forbidden by the rule named __proto__")
forbid (principal, action == Arbiter::Action::"token", resource);
`,
    });
    expect(rule.status, JSON.stringify(rule.body)).to.be.oneOf([200, 201]);
    try {
      const denied = await tokenOnceStatusIs(400);
      expect(denied.body).to.include({
        error: 'access_denied',
        error_description: 'forbidden by the rule named __proto__',
      });
      expect((await lastTokenAudit()).policyDecision.engines.cedarPolicies).to.deep.equal(['__proto__']);
    } finally {
      expect((await server.admin('DELETE', `/policy-rules/${rule.body.id}`)).status).to.equal(204);
    }
    await tokenOnceStatusIs(200);
  });

  it('decides again as soon as the entity data is readable', async function () {
    await setEntities([]);
    await tokenOnceStatusIs(200);
    await setUnreadableEntities({ not: 'an array' });
    await expectFailedClosed();

    await setEntities([{ uid: client, attrs: { tier: 'gold' }, parents: [] }]);
    expect((await tokenOnceStatusIs(200)).body.scope).to.equal('read');
  });
});
