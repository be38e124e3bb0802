/** The Cedar driver on its own (real cedar-wasm): mapping, entities from data, applicability, outputs. */
import { expect } from 'chai';
import { snapshotOf } from '../../src/policy/bundle/build.js';
import { CedarDriver, MAX_CEDAR_ENTITIES, MAX_CEDAR_HIERARCHY_DEPTH } from '../../src/policy/cedar/driver.js';
import type { DecisionInput, PolicyDataDoc, PolicyRuleDoc } from '../../src/policy/index.js';
import { authorizeInput, evaluationInput, clientCredentialsInput } from './inputs.js';
import { confidentialClient, publicClient } from './support.js';

const now = new Date().toISOString();
const shared = { version: null, tenantId: null, createdAt: now, updatedAt: now };

function snapshot(cedarRules: string[], data: Record<string, unknown> = {}) {
  const rules: PolicyRuleDoc[] = cedarRules.map((content, index) => ({
    ...shared,
    id: index + 1,
    kind: 'cedar',
    path: `arbiter/r${index}.cedar`,
    content,
    enabled: true,
    digest: null,
  }));
  const entries: PolicyDataDoc[] = Object.entries(data).map(([dataKey, payload], index) => ({
    ...shared,
    id: index + 1,
    dataKey,
    payload: JSON.stringify(payload),
  }));
  return snapshotOf({ rules, data: entries });
}

describe('Cedar driver', function () {
  const driver = new CedarDriver();
  const entities = [
    { uid: { type: 'user', id: 'alice' }, attrs: { level: 3 }, parents: [{ type: 'Group', id: 'editors' }] },
    { uid: { type: 'Action', id: 'edit' }, attrs: {}, parents: [{ type: 'Action', id: 'writes' }] },
  ];
  const groupPolicy = snapshot(
    [
      '@id("editors-write") permit (principal in Group::"editors", action in Action::"writes", resource) when { principal.level >= 2 };',
    ],
    {
      'cedar.entities': entities,
    },
  );
  const doc = { id: 'd1', properties: {} };

  it('resolves groups and action groups through the entities in policy data', function () {
    const verdict = driver.evaluate(groupPolicy, 'access_evaluation', evaluationInput('alice', 'edit', doc));
    expect(verdict).to.deep.include({ kind: 'decided', allow: true, policies: ['editors-write'] });
  });

  it('applies only to actions its policies cover; then it denies what no policy permits', function () {
    expect(driver.evaluate(groupPolicy, 'access_evaluation', evaluationInput('alice', 'read', doc))).to.deep.equal({
      kind: 'none',
    });
    const denied = driver.evaluate(groupPolicy, 'access_evaluation', evaluationInput('bob', 'edit', doc));
    expect(denied).to.deep.include({ kind: 'decided', allow: false, policies: [] });
    expect(denied).to.have.nested.property('outputs.error', 'access_denied');
  });

  it('maps other points to Arbiter:: entities with the whole input as context', function () {
    const rules = snapshot([
      '@extension_source("\\"cedar\\"") permit (principal is Arbiter::Client, action == Arbiter::Action::"token", resource is Arbiter::Endpoint) when { context.client.client_type == "confidential" && context.request.grant_type == "client_credentials" };',
    ]);
    const allowed = driver.evaluate(rules, 'token', clientCredentialsInput(confidentialClient));
    expect(allowed).to.deep.include({ kind: 'decided', allow: true });
    expect(allowed).to.have.nested.property('outputs.extensions.source', 'cedar');
    expect(driver.evaluate(rules, 'token', clientCredentialsInput(publicClient))).to.deep.include({
      kind: 'decided',
      allow: false,
    });
    expect(driver.evaluate(rules, 'authorize', clientCredentialsInput(confidentialClient))).to.deep.equal({
      kind: 'none',
    });
  });

  it('fails every decision closed when a stored Cedar rule is invalid', function () {
    const broken = snapshot([
      'permit (principal, action, resource);',
      'forbid (principal, action, resource) when { oops };',
    ]);
    const verdict = driver.evaluate(broken, 'access_evaluation', evaluationInput('alice', 'edit', doc));
    expect(verdict.kind).to.equal('failed');
    expect(verdict)
      .to.have.property('reason')
      .that.matches(/arbiter\/r1\.cedar is invalid/);
  });

  it('fails every decision closed when a stored Cedar rule holds a template', function () {
    const withTemplate = snapshot([
      'permit (principal, action, resource);',
      'forbid (principal == ?principal, action, resource);',
    ]);
    const verdict = driver.evaluate(withTemplate, 'access_evaluation', evaluationInput('alice', 'edit', doc));
    expect(verdict).to.have.property('kind', 'failed');
    expect(verdict)
      .to.have.property('reason')
      .that.matches(/arbiter\/r1\.cedar is invalid: .*template/);
  });

  it('fails every decision closed, instead of leaving them out, when the entities in policy data cannot be converted', function () {
    const rules = [
      '@id("editors-write") permit (principal in Group::"editors", action in Action::"writes", resource);',
      'forbid (principal in Group::"banned", action, resource);',
    ];
    const unreadable: unknown[] = [
      { alice: { parents: [{ type: 'Group', id: 'banned' }] } },
      null,
      [{ uid: { type: 'user', id: 'alice' }, parents: [{ type: 'Group', id: 'banned' }] }],
      [{ uid: { type: 'user', id: 'alice' }, attrs: { level: 2.5 }, parents: [] }],
      [entities[0], { ...entities[0], parents: [{ type: 'Group', id: 'banned' }] }],
    ];
    for (const data of unreadable) {
      const verdict = driver.evaluate(
        snapshot(rules, { 'cedar.entities': data }),
        'access_evaluation',
        evaluationInput('alice', 'read', doc),
      );
      expect(verdict, JSON.stringify(data)).to.have.property('kind', 'failed');
      expect(verdict)
        .to.have.property('reason')
        .that.matches(/^Cedar entities in policy data cedar\.entities cannot be converted/);
    }
  });

  it('fails a decision closed when a forbid it would have applied cannot be evaluated, rather than skipping it as Cedar does', function () {
    const rules = [
      '@id("all") permit (principal, action, resource);',
      '@id("no-contractors") forbid (principal, action, resource) when { principal.department == "contractors" };',
    ];
    // alice has no department: Cedar's evaluation of the forbid errors, and Cedar alone would allow.
    const verdict = driver.evaluate(snapshot(rules), 'access_evaluation', evaluationInput('alice', 'read', doc));
    expect(verdict).to.have.property('kind', 'failed');
    expect(verdict).to.have.property('reason').that.contains('the forbid policy no-contractors');
    // A guarded forbid evaluates: the permit decides.
    const guarded = [rules[0]!, rules[1]!.replace('when { ', 'when { principal has department && ')];
    expect(driver.evaluate(snapshot(guarded), 'access_evaluation', evaluationInput('alice', 'read', doc))).to.include({
      kind: 'decided',
      allow: true,
    });
  });

  it('fails every decision closed on entity data past its bounds: more entities, or a longer chain of parents', function () {
    const rules = ['permit (principal, action, resource);'];
    const chain = (length: number) =>
      Array.from({ length }, (_, index) => ({
        uid: { type: 'Group', id: `g${index}` },
        attrs: {},
        parents: index ? [{ type: 'Group', id: `g${index - 1}` }] : [],
      }));
    const verdictWith = (data: unknown) =>
      driver.evaluate(
        snapshot(rules, { 'cedar.entities': data }),
        'access_evaluation',
        evaluationInput('alice', 'read', doc),
      );
    // g32 has 32 ancestors: the bound.
    expect(verdictWith(chain(MAX_CEDAR_HIERARCHY_DEPTH + 1))).to.have.property('kind', 'decided');
    expect(verdictWith(chain(MAX_CEDAR_HIERARCHY_DEPTH + 2)))
      .to.have.property('reason')
      .that.contains(`has a chain of parents longer than ${MAX_CEDAR_HIERARCHY_DEPTH}`);
    const many = Array.from({ length: MAX_CEDAR_ENTITIES + 1 }, (_, index) => ({
      uid: { type: 'Group', id: `m${index}` },
      attrs: {},
      parents: [],
    }));
    expect(verdictWith(many.slice(1))).to.have.property('kind', 'decided');
    expect(verdictWith(many))
      .to.have.property('reason')
      .that.contains(`${MAX_CEDAR_ENTITIES + 1} entities, more than ${MAX_CEDAR_ENTITIES}`);
  });

  describe('several resource indicators (RFC 8707)', function () {
    const LEDGER = 'https://ledger.example/';
    const VAULT = 'https://vault.example/';
    const rules = snapshot([
      '@id("all") permit (principal, action == Arbiter::Action::"authorize", resource);',
      '@id("no-vault") @error("invalid_target") forbid (principal, action == Arbiter::Action::"authorize", resource is Arbiter::Resource) when { resource has type && resource.type == "urn:example:vault" };',
    ]);
    const withResources = (...resources: [string, string | null][]): DecisionInput => {
      const input = authorizeInput('openid read');
      const indicators = resources.map(([resource, type]) => ({ resource, resolved_resource_type: type }));
      return {
        ...input,
        request: { ...input.request, resource: null, resolved_resource_type: null, resources: indicators },
      };
    };

    it('asks once per resource, so that a forbid on one resource refuses it beside others too (request.resource is null then)', function () {
      const together = driver.evaluate(
        rules,
        'authorize',
        withResources([LEDGER, 'urn:example:ledger'], [VAULT, 'urn:example:vault']),
      );
      expect(together).to.deep.include({ kind: 'decided', allow: false, policies: ['no-vault'] });
      expect(together).to.have.nested.property('outputs.error', 'invalid_target');
    });

    it('allows several resources only when every one is permitted, with the permits of all', function () {
      const verdict = driver.evaluate(
        rules,
        'authorize',
        withResources([LEDGER, 'urn:example:ledger'], ['https://mail.example/', null]),
      );
      expect(verdict).to.deep.include({ kind: 'decided', allow: true, policies: ['all'] });
    });
  });

  it('does not read entity data when there is no Cedar policy', function () {
    const verdict = driver.evaluate(
      snapshot([], { 'cedar.entities': { not: 'an array' } }),
      'access_evaluation',
      evaluationInput('alice', 'edit', doc),
    );
    expect(verdict).to.deep.equal({ kind: 'none' });
  });
});
