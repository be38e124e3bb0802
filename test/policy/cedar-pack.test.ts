/**
 * The Cedar example pack (policies/cedar/): valid for its schema, the schema true to what the
 * mapping hands Cedar, the pack deciding as its comments say, and docs/policy.md's rule written
 * in both languages deciding alike.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { snapshotOf } from '../../src/policy/bundle/build.js';
import { CedarDriver } from '../../src/policy/cedar/driver.js';
import { cedarRequestFor } from '../../src/policy/cedar/mapping.js';
import { cedar, formatCedarErrors } from '../../src/policy/cedar/wasm.js';
import { exampleInput, POLICY_EXAMPLES, type PolicyExample } from '../../src/policy/contract/examples.js';
import {
  POLICY_PACK_DIR,
  readPolicyPack,
  type DecisionInput,
  type DecisionPoint,
  type PolicyRuleDoc,
} from '../../src/policy/index.js';
import { CEDAR_EXAMPLES } from '../../src/policy/seed.js';
import { fencedAfter, readDocs } from './docs.js';
import { putRule, ruleAt, eventually, startPolicyHarness, type PolicyHarness } from './support.js';

const CEDAR_DIR = join(POLICY_PACK_DIR, CEDAR_EXAMPLES);
const SCHEMA = readFileSync(join(CEDAR_DIR, 'arbiter.cedarschema'), 'utf8');
const PACK = readdirSync(CEDAR_DIR)
  .filter((file) => file.endsWith('.cedar'))
  .map((file) => ({ path: `${CEDAR_EXAMPLES}${file}`, content: readFileSync(join(CEDAR_DIR, file), 'utf8') }));

function example(name: string): PolicyExample {
  const found = POLICY_EXAMPLES.find((candidate) => candidate.name === name);
  if (!found) throw new Error(`no example ${name}`);
  return found;
}

/** An example's input with changes, as the policy sees it. */
function inputOf(name: string, change: (input: Record<string, any>) => void = () => {}): DecisionInput {
  const input = exampleInput(example(name));
  change(input);
  return input as DecisionInput;
}

function validate(policies: string) {
  return cedar().validate({
    schema: SCHEMA,
    policies: { staticPolicies: policies },
    validationSettings: { mode: 'strict' },
  });
}

describe('the Cedar example pack', function () {
  it('is valid for its schema (strict validation), which the validator does apply', function () {
    const answer = validate(PACK.map((file) => file.content).join('\n'));
    expect(answer).to.deep.include({ type: 'success', validationErrors: [] });
    const misspelt = validate(
      'permit (principal, action == Arbiter::Action::"token", resource) when { context.request.scope == "x" };',
    );
    expect(
      misspelt.type === 'success' && misspelt.validationErrors.length,
      'an attribute the schema lacks is an error',
    ).to.equal(1);
  });

  it("validates the Cedar rules of docs/policy.md's worked examples too", function () {
    const rules = POLICY_EXAMPLES.flatMap((example) => example.rules ?? []).filter((rule) =>
      rule.path.endsWith('.cedar'),
    );
    expect(rules).to.have.length.at.least(1);
    for (const rule of rules)
      expect(validate(rule.content), rule.path).to.deep.include({ type: 'success', validationErrors: [] });
  });

  it("has a schema that describes what the mapping gives Cedar at each point of the docs' examples", function () {
    for (const documented of POLICY_EXAMPLES.filter((candidate) => candidate.point !== 'access_evaluation')) {
      const request = cedarRequestFor(documented.point, exampleInput(documented) as DecisionInput);
      const answer = cedar().isAuthorized({
        ...request,
        context: withoutFreeFormMaps(request.context),
        entities: request.entities,
        schema: SCHEMA,
        validateRequest: true,
        policies: { staticPolicies: 'permit (principal, action, resource);' },
      });
      if (answer.type === 'failure') expect.fail(`${documented.name}: ${formatCedarErrors(answer.errors)}`);
    }
  });

  it('leaves no Cedar policy of docs/policy.md that Cedar cannot parse', function () {
    const blocks = [...readDocs().matchAll(/```cedar\n([\s\S]*?)\n```\n/g)].map((match) => match[1]!);
    expect(blocks.length).to.be.greaterThan(2);
    for (const text of blocks) {
      const parts = cedar().policySetTextToParts(text);
      if (parts.type === 'failure') expect.fail(`${text}\n${formatCedarErrors(parts.errors, text)}`);
    }
  });

  it('is not seeded: the default pack stays Rego only', async function () {
    const pack = await readPolicyPack();
    expect(pack.rules.filter((rule) => rule.path.startsWith(CEDAR_EXAMPLES))).to.deep.equal([]);
  });

  describe('deciding', function () {
    const driver = new CedarDriver();
    const now = new Date().toISOString();
    const rules: PolicyRuleDoc[] = PACK.map((file, index) => ({
      version: null,
      tenantId: null,
      createdAt: now,
      updatedAt: now,
      id: index + 1,
      kind: 'cedar',
      enabled: true,
      digest: null,
      ...file,
    }));
    const snapshot = snapshotOf({ rules, data: [] });
    const decide = (point: DecisionPoint, input: DecisionInput) => driver.evaluate(snapshot, point, input);

    it('leaves the documented token, introspection and UMA decisions allowed', function () {
      for (const name of [
        'token',
        'token_exchange',
        'introspect',
        'uma_permission',
        'uma_permission-rpt',
        'delegation',
      ]) {
        expect(decide(example(name).point, inputOf(name)), name).to.deep.include({ kind: 'decided', allow: true });
      }
    });

    it('refuses invoices.write to reports-app, whoever the user', function () {
      const asked = inputOf('token', (input) => {
        input.client.client_id = 'reports-app';
        input.request.scopes = ['invoices.write'];
      });
      expect(decide('token', asked)).to.deep.include({
        kind: 'decided',
        allow: false,
        policies: ['reports-app-never-writes-invoices'],
      });
      expect(decide('token', asked)).to.have.nested.property('outputs.error', 'invalid_scope');
      expect(
        decide(
          'token',
          inputOf('token', (input) => (input.request.scopes = ['invoices.write'])),
        ),
      ).to.deep.include({ allow: true });
    });

    it('refuses a public client token exchange, bearer callers refresh tokens, and delegations to clients', function () {
      const byPublic = inputOf('token_exchange', (input) => (input.client.client_type = 'public'));
      expect(decide('token_exchange', byPublic)).to.have.nested.property('outputs.error', 'unauthorized_client');
      const refresh = inputOf('introspect', (input) => (input.token.token_type = 'refresh_token'));
      expect(decide('introspect', refresh)).to.deep.include({
        allow: false,
        policies: ['refresh-tokens-not-to-bearer-callers'],
      });
      const toClient = inputOf('delegation', (input) =>
        Object.assign(input.delegation, { grantee_type: 'client', grantee_subject_id: null, grantee_client_id: 'spa' }),
      );
      expect(decide('delegation', toClient)).to.deep.include({ allow: false, policies: ['delegate-to-users-only'] });
    });

    it('decides the ssf point as the Rego pack does: a receiver its own streams, never a public client', function () {
      expect(decide('ssf', inputOf('ssf'))).to.deep.include({
        kind: 'decided',
        allow: true,
        policies: ['ssf-streams-by-their-owner'],
      });
      const others = decide(
        'ssf',
        inputOf('ssf', (input) => (input.ssf.stream.owner_client_id = 'another-receiver')),
      );
      expect(others).to.deep.include({ allow: false, policies: ['ssf-stream-of-another-receiver'] });
      expect(others).to.have.nested.property('outputs.error', 'access_denied');
      const publicOwner = decide('ssf', inputOf('ssf-public-client'));
      expect(publicOwner).to.deep.include({ allow: false, policies: ['ssf-no-public-receivers'] });
      expect(publicOwner).to.have.nested.property('outputs.error', 'unauthorized_client');
    });

    it('decides a delegation as the Rego pack does: by the owner, within the resource scopes', function () {
      const refused = (change: (input: Record<string, any>) => void) =>
        decide('delegation', inputOf('delegation', change));
      expect(refused((input) => (input.subject = { sub: 'bob' }))).to.deep.include({
        allow: false,
        policies: ['delegation-by-the-resource-owner'],
      });
      expect(refused((input) => (input.delegation.scopes = ['view', 'delete']))).to.deep.include({
        allow: false,
        policies: ['delegated-scopes-among-the-resource'],
      });
      // Revoking stays the owner's (protocol code shows a delegation to its owner only), expired or not.
      expect(
        refused((input) => Object.assign(input.delegation, { operation: 'revoke', scopes: ['delete'] })),
      ).to.deep.include({ allow: true });
    });

    it('lets only the owner print a private photo', function () {
      const privatePhoto = (sub: string) =>
        inputOf('uma_permission', (input) => {
          input.subject = { sub };
          input.permission.resource_scopes = ['print'];
          input.permission.resource.type = 'https://photos.example/private';
        });
      expect(decide('uma_permission', privatePhoto('alice'))).to.deep.include({ allow: true });
      expect(decide('uma_permission', privatePhoto('bob'))).to.deep.include({
        allow: false,
        policies: ['private-photos-print-only-for-owner'],
      });
    });
  });

  describe("docs/policy.md's rule in both languages", function () {
    let harness: PolicyHarness;

    before(async function () {
      harness = await startPolicyHarness();
    });

    after(async function () {
      await harness?.close();
    });

    it('quotes the Cedar policy from the pack', function () {
      const quoted = fencedAfter('<!-- cedar: reports-app -->', 'cedar');
      expect(PACK.find((file) => file.path === `${CEDAR_EXAMPLES}token.cedar`)?.content).to.contain(quoted);
    });

    it('decides alike in Rego: the branch the docs add to arbiter/token/token.rego', async function () {
      const branch = fencedAfter('<!-- rego: reports-app -->', 'rego');
      const tokenRule = await ruleAt(harness.store, 'arbiter/token/token.rego');
      const anchor = 'decision := lib.details_denial(unknown_details) if {';
      expect(tokenRule.content, 'the docs say where the branch goes').to.contain(anchor);
      expect(
        branch.endsWith(`} else := ${anchor.slice('decision := '.length)}`),
        'the branch ends where the chain goes on',
      ).to.equal(true);
      await putRule(harness.store, { ...tokenRule, content: tokenRule.content.replace(anchor, branch) });
      const asked = inputOf('token', (input) => {
        input.client.client_id = 'reports-app';
        input.request.scopes = ['invoices.write'];
      });
      await eventually(async () => {
        const outcome = await harness.engine.decide('token', asked);
        expect(outcome.decision).to.deep.equal({
          allow: false,
          error: 'invalid_scope',
          error_description: 'reports-app may not obtain invoices.write',
        });
      });
      expect((await harness.engine.decide('token', inputOf('token'))).decision).to.deep.include({ allow: true });
    });
  });
});

/**
 * The context without the maps whose keys are the client's or the issuer's to choose (request
 * parameters, registration metadata, statement claims, the introspection caller's context, a
 * resource server's capability): Cedar records are closed, so the schema declares only their
 * well-known keys.
 */
function withoutFreeFormMaps(context: Record<string, any>): Record<string, any> {
  const copy = structuredClone(context);
  copy.request.parameters = {};
  delete copy.context;
  if (copy.caller?.resource_server) copy.caller.resource_server.capability = {};
  if (copy.registration) {
    copy.registration.metadata = {};
    if (copy.registration.software_statement) copy.registration.software_statement.claims = {};
  }
  return copy;
}
