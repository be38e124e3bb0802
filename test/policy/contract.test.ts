/** The decision contract's schemas, the request-input helper and the first-start seed. */
import { expect } from 'chai';
import {
  checkInput,
  checkResult,
  DECISION_POINTS,
  inputSchema,
  POLICY_DATA,
  POLICY_RULES,
  readPolicyPack,
  requestInput,
  seedDefaultPolicies,
  type PolicyRuleDoc,
} from '../../src/policy/index.js';
import { openArbiterStore as openStore } from '../../src/collections.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';
import {
  authorizeInput,
  delegationInput,
  evaluationInput,
  introspectInput,
  permissionInput,
  registerInput,
  tokenExchangeInput,
} from './inputs.js';
import { alice, log, putRule } from './support.js';

describe('decision contract', function () {
  it('has a JSON schema for the input of every decision point', function () {
    for (const point of DECISION_POINTS)
      expect(inputSchema(point)).to.have.property('$id', `arbiter:policy:input:${point}`);
  });

  it('accepts the documented inputs of each point', function () {
    const examples = {
      authorize: authorizeInput('openid'),
      token: authorizeInput('openid'),
      token_exchange: tokenExchangeInput('openid'),
      introspect: introspectInput(['introspection']),
      register: registerInput(null),
      access_evaluation: evaluationInput('alice', 'read', { id: 'd', properties: {} }),
      uma_permission: permissionInput(alice, ['view']),
      delegation: delegationInput(alice, ['view']),
    };
    for (const [point, input] of Object.entries(examples))
      expect(checkInput(point as keyof typeof examples, input), point).to.equal(null);
  });

  it('names the first problem of a malformed input', function () {
    expect(checkInput('token_exchange', authorizeInput('openid'))).to.equal(
      "(root) must have required property 'subject_token' (subject_token)",
    );
    expect(checkInput('authorize', { ...authorizeInput('openid'), time: 'yesterday' })).to.match(
      /^\/time must match pattern/,
    );
    const { client: _client, ...withoutClient } = authorizeInput('openid');
    expect(checkInput('authorize', withoutClient as never), 'client is always there, null when unknown').to.match(
      /required property 'client'/,
    );
  });

  it('checks results', function () {
    expect(checkResult({ allow: true, scopes: ['a'], obligations: {} })).to.equal(null);
    expect(checkResult({ scopes: ['a'] })).to.match(/allow/);
    expect(checkResult({ allow: 'yes' })).to.match(/\/allow must be boolean/);
  });

  it('derives input.request from the raw parameters and drops credentials', function () {
    const request = requestInput({
      endpoint: '/token',
      parameters: {
        grant_type: 'client_credentials',
        client_secret: 's3cret',
        client_assertion: 'jwt',
        scope: 'a  b',
        resource: 'https://api.example',
        resource_types: 'urn:t1, urn:t2',
        authorization_details: '[{"type":"urn:t1","actions":["read"]}]',
      },
    });
    expect(request).to.deep.equal({
      endpoint: '/token',
      method: 'POST',
      parameters: {
        grant_type: 'client_credentials',
        scope: 'a  b',
        resource: 'https://api.example',
        resource_types: 'urn:t1, urn:t2',
        authorization_details: '[{"type":"urn:t1","actions":["read"]}]',
      },
      grant_type: 'client_credentials',
      scopes: ['a', 'b'],
      resource: 'https://api.example',
      resolved_resource_type: null,
      resources: [{ resource: 'https://api.example', resolved_resource_type: null }],
      resource_types: ['urn:t1', 'urn:t2'],
      authorization_details: [{ type: 'urn:t1', actions: ['read'] }],
    });
  });
});

describe('default policy pack seed', function () {
  it('seeds the pack on first start only', async function () {
    const store = await openStore('sqlite::memory:');
    try {
      const pack = await readPolicyPack();
      await seedDefaultPolicies(store, log);
      const rules = await store.collection(POLICY_RULES, DEFAULT_TENANT).find({ tenantId: null });
      expect(rules.map((rule) => rule.path).sort()).to.deep.equal(pack.rules.map((rule) => rule.path).sort());
      expect(
        rules.every(
          (rule) => rule.enabled === true && rule.version === null && String(rule.digest).startsWith('sha256:'),
        ),
      ).to.equal(true);
      const data = await store.collection(POLICY_DATA, DEFAULT_TENANT).find({});
      expect(data.map((entry) => entry.dataKey)).to.deep.equal(['oauth']);

      const introspect = await store
        .collection<PolicyRuleDoc>(POLICY_RULES, DEFAULT_TENANT)
        .findOne({ path: 'arbiter/introspect/introspect.rego' });
      await putRule(store, { ...(introspect as PolicyRuleDoc), enabled: false });
      await seedDefaultPolicies(store, log);
      expect(await store.collection(POLICY_RULES, DEFAULT_TENANT).count({})).to.equal(rules.length);
      expect(
        (await store.collection(POLICY_RULES, DEFAULT_TENANT).findOne({ path: 'arbiter/introspect/introspect.rego' }))
          ?.enabled,
      ).to.equal(false);
    } finally {
      await store.close();
    }
  });
});
