import { expect } from 'chai';
import type { Context } from 'koa';
import { resourceRecords, resourceTypeRecords } from '../../../src/catalog/index.js';
import {
  isValidResourceIndicator,
  resolveResource,
  resolveResources,
  resourceList,
} from '../../../src/oauth/shared/resources.js';
import { defaultResourceForDetails } from '../../../src/oauth/shared/rar.js';
import { recordDecision, type AuditFacts } from '../../../src/audit/index.js';
import { failClosed } from '../../../src/policy/combine.js';
import type { DecisionInput, DecisionOutcome } from '../../../src/policy/index.js';
import {
  answerPage,
  listPage,
  listSearch,
  MAX_LIST_LIMIT,
  MAX_SEARCH_LENGTH,
  TOTAL_COUNT_HEADER,
} from '../../../src/admin/paging.js';
import { HttpError } from '../../../src/http/errors.js';
import { memoryStore, saveResourceServer, TENANT } from '../../support/unit.js';

describe('unit: resource indicators (RFC 8707, shared/resources)', function () {
  const store = memoryStore();
  before(async function () {
    await saveResourceServer(store(), 'https://typed.example.test/', { typeUris: ['urn:first', 'urn:second'] });
    await saveResourceServer(store(), 'https://untyped.example.test/');
    await saveResourceServer(store(), 'https://disabled.example.test/', { enabled: false, typeUris: ['urn:off'] });
    await resourceTypeRecords(store(), TENANT).insert({ id: 7, tenantId: null, typeUri: 'urn:registered-resource' });
    await resourceRecords(store(), TENANT).insert({
      id: 1,
      tenantId: null,
      resourceIdentifier: 'https://disabled.example.test/',
      resourceTypeId: 7,
      resourceServerId: 1,
    });
  });

  it('resourceList: absent is none, one value is one, a repeated one is all of them in order', function () {
    expect(resourceList(undefined)).to.deep.equal([]);
    expect(resourceList('https://a.test/')).to.deep.equal(['https://a.test/']);
    expect(resourceList(['https://b.test/', 'https://a.test/'])).to.deep.equal(['https://b.test/', 'https://a.test/']);
    expect(resourceList(['https://a.test/', 3, null])).to.deep.equal(['https://a.test/']);
    expect(resourceList(42)).to.deep.equal([]);
  });

  for (const [value, valid] of [
    ['https://api.example.test/', true],
    ['urn:example:api', true],
    ['https://api.example.test/#frag', false],
    ['/relative/path', false],
    ['not a uri', false],
    ['', false],
  ] as const) {
    it(`isValidResourceIndicator(${JSON.stringify(value)}) is ${valid}`, function () {
      expect(isValidResourceIndicator(value)).to.equal(valid);
    });
  }

  it("resolves a registered resource server to its first type, whatever the caller's hint", async function () {
    expect(await resolveResource(store(), TENANT, 'https://typed.example.test/', 'urn:hint')).to.deep.include({
      typeUri: 'urn:first',
    });
  });

  it('resolves a resource server without types to the hint, and keeps the server', async function () {
    const resolved = await resolveResource(store(), TENANT, 'https://untyped.example.test/', 'urn:hint');
    expect(resolved.typeUri).to.equal('urn:hint');
    expect(resolved.server).to.include({ resourceIndicator: 'https://untyped.example.test/' });
  });

  it('passes over a disabled resource server to the registered resource of that identifier', async function () {
    const resolved = await resolveResource(store(), TENANT, 'https://disabled.example.test/', 'urn:hint');
    expect(resolved).to.deep.equal({ server: null, typeUri: 'urn:registered-resource' });
  });

  it('takes the hint for an unknown resource, and for no resource at all', async function () {
    expect(await resolveResource(store(), TENANT, 'https://unknown.test/', 'urn:hint')).to.deep.equal({
      server: null,
      typeUri: 'urn:hint',
    });
    expect(await resolveResource(store(), TENANT, null, 'urn:hint')).to.deep.equal({
      server: null,
      typeUri: 'urn:hint',
    });
  });

  it("sees only the request's tenant", async function () {
    expect((await resolveResource(store(), 'other-tenant', 'https://typed.example.test/', null)).typeUri).to.equal(
      null,
    );
  });

  it('resolveResources uses the hint for a single resource only (with several it would be ambiguous)', async function () {
    expect(await resolveResources(store(), TENANT, ['https://unknown.test/'], 'urn:hint')).to.deep.equal([
      { resource: 'https://unknown.test/', resolved_resource_type: 'urn:hint' },
    ]);
    expect(
      await resolveResources(store(), TENANT, ['https://unknown.test/', 'https://typed.example.test/'], 'urn:hint'),
    ).to.deep.equal([
      { resource: 'https://unknown.test/', resolved_resource_type: null },
      { resource: 'https://typed.example.test/', resolved_resource_type: 'urn:first' },
    ]);
  });

  describe('the default resource of a RAR request (shared/rar)', function () {
    const issuer = 'https://as.example.test';
    const ctx = (params: Record<string, unknown>) => ({ oidc: { params } });

    it('is this server for a request with authorization details and no resource', async function () {
      expect(await defaultResourceForDetails(issuer)(ctx({ authorization_details: '[]' }))).to.equal(issuer);
    });

    it('is none for a request without authorization details', async function () {
      expect(await defaultResourceForDetails(issuer)(ctx({}))).to.equal(undefined);
    });

    it('hands back the list of resources a token request must choose among (oidc-provider then refuses it)', async function () {
      const oneOf = ['https://a.test/', 'https://b.test/'];
      expect(await defaultResourceForDetails(issuer)(ctx({ authorization_details: '[]' }), undefined, oneOf)).to.equal(
        oneOf,
      );
    });
  });
});

describe("unit: a decision's facts in the audit entry (audit/decision recordDecision)", function () {
  const input = (clientId: string | null, sub: string | null, extra: object = {}) =>
    ({
      tenant: TENANT,
      client: clientId ? { client_id: clientId } : null,
      subject: sub ? { sub } : null,
      request: { endpoint: '/token' },
      time: '2026-01-01T00:00:00Z',
      ...extra,
    }) as unknown as DecisionInput;
  const allowed = (extra: object = {}): DecisionOutcome => ({
    point: 'token',
    decision: { allow: true, scopes: ['read'] },
    input: input('app', 'alice', extra),
  });
  const denied = (extra: object = {}): DecisionOutcome => ({
    point: 'token',
    decision: { allow: false, error: 'invalid_scope' },
    input: input('app', 'alice', extra),
  });

  it('writes nothing when the request is not audited', function () {
    const state: Record<string, unknown> = {};
    recordDecision(state, allowed());
    expect(state).to.deep.equal({});
  });

  it('keeps one decision with its point, its input, its outcome, client and subject', function () {
    const state = { audit: {} as AuditFacts };
    const outcome = { ...allowed(), engines: { rego: 'allow' as const, cedar: 'none' as const } };
    recordDecision(state, outcome);
    expect(state.audit).to.deep.equal({
      policyInput: outcome.input,
      policyDecision: { allow: true, scopes: ['read'], point: 'token', engines: outcome.engines },
      outcome: 'allow',
      clientId: 'app',
      subjectId: 'alice',
    });
  });

  it('keeps the engine error of a failed decision, and says outcome error', function () {
    const state = { audit: {} as AuditFacts };
    recordDecision(state, failClosed('token', input(null, null), 'OPA down'));
    expect(state.audit.outcome).to.equal('error');
    expect(state.audit.policyDecision).to.deep.include({ engineError: 'OPA down', allow: false });
    expect(state.audit).to.include({ clientId: null, subjectId: null });
  });

  it('keeps several decisions as the part they share and what is their own', function () {
    const state = { audit: {} as AuditFacts };
    recordDecision(state, allowed({ permission: 'a' }), denied({ permission: 'b' }));
    expect(state.audit.policyInput).to.deep.include({ items: [{ permission: 'a' }, { permission: 'b' }] });
    expect((state.audit.policyInput as { common: object }).common).to.include({ tenant: TENANT });
    expect(state.audit.outcome, 'one allow among several makes it an allow').to.equal('allow');
  });

  it('says deny when every one of several denies, and error when any failed', function () {
    const denies = { audit: {} as AuditFacts };
    recordDecision(denies, denied(), denied());
    expect(denies.audit.outcome).to.equal('deny');
    const fails = { audit: {} as AuditFacts };
    recordDecision(fails, allowed(), failClosed('token', input('app', null), 'x'));
    expect(fails.audit.outcome).to.equal('error');
  });

  it('changes nothing when given no decision', function () {
    const state = { audit: {} as AuditFacts };
    recordDecision(state);
    expect(state.audit).to.deep.equal({});
  });
});

describe('unit: Admin API list paging (admin/paging)', function () {
  const listContext = (query: Record<string, string | string[]>) => {
    const headers: Record<string, string> = {};
    const querystring = new URLSearchParams(
      Object.entries(query).flatMap(([key, value]) => [value].flat().map((each): [string, string] => [key, each])),
    ).toString();
    const ctx = {
      query,
      querystring,
      originalUrl: `/admin/api/clients?${querystring}`,
      set: (name: string, value: string) => (headers[name] = value),
    } as unknown as Context;
    return { ctx, headers };
  };

  it('defaults to the first record and the largest page', function () {
    expect(listPage(listContext({}).ctx)).to.deep.equal({ offset: 0, limit: MAX_LIST_LIMIT });
  });

  it('reads offset and limit as given', function () {
    expect(listPage(listContext({ offset: '20', limit: '10' }).ctx)).to.deep.equal({ offset: 20, limit: 10 });
  });

  for (const [name, value] of [
    ['limit', '0'],
    ['limit', String(MAX_LIST_LIMIT + 1)],
    ['limit', '-1'],
    ['limit', '1.5'],
    ['offset', 'ten'],
    ['offset', '99999999'],
  ] as const) {
    it(`refuses ${name}=${value} with a 400 naming ${name}`, function () {
      expect(() => listPage(listContext({ [name]: value }).ctx))
        .to.throw(HttpError)
        .that.satisfies((error: HttpError) => error.status === 400 && error.details.field === name);
    });
  }

  it('refuses a limit given twice', function () {
    expect(() => listPage(listContext({ limit: ['1', '2'] }).ctx)).to.throw(HttpError);
  });

  it('reads q as a search of the given fields, and no q or an empty one as no search', function () {
    expect(listSearch(listContext({ q: 'Acme' }).ctx, ['clientId', 'clientName'])).to.deep.equal({
      fields: ['clientId', 'clientName'],
      text: 'Acme',
    });
    expect(listSearch(listContext({}).ctx, ['clientId'])).to.equal(undefined);
    expect(listSearch(listContext({ q: '' }).ctx, ['clientId'])).to.equal(undefined);
  });

  it('refuses a q that is too long or holds a control character', function () {
    expect(() => listSearch(listContext({ q: 'x'.repeat(MAX_SEARCH_LENGTH + 1) }).ctx, ['a'])).to.throw(HttpError);
    expect(() => listSearch(listContext({ q: 'a\u0007b' }).ctx, ['a'])).to.throw(HttpError);
  });

  it('answers a page, naming the next one in Link when there is one more record, and the total', function () {
    const { ctx, headers } = listContext({ q: 'x', limit: '2' });
    const page = answerPage(ctx, { offset: 4, limit: 2 }, ['a', 'b', 'c'], 11);
    expect(page).to.deep.equal(['a', 'b']);
    expect(headers.Link).to.equal('</admin/api/clients?q=x&limit=2&offset=6>; rel="next"');
    expect(headers[TOTAL_COUNT_HEADER]).to.equal('11');
  });

  it('names no next page on the last one, and no total when it is not known', function () {
    const { ctx, headers } = listContext({});
    expect(answerPage(ctx, { offset: 0, limit: 5 }, ['a'], null)).to.deep.equal(['a']);
    expect(headers).to.deep.equal({});
  });
});
