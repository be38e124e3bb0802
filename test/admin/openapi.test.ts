import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { expect } from 'chai';
import { ADMIN_PREFIX, AdminApiKeys, adminRouter } from '../../src/admin/index.js';
import { COLLECTIONS } from '../../src/catalog/index.js';
import { AuditLog } from '../../src/audit/index.js';
import { POLICY_IMPACT_REQUEST_SCHEMA, POLICY_LAB_SCHEMAS, SHADOW_ACTION_SCHEMA } from '../../src/admin/policy-lab.js';
import { Sealer } from '../../src/store/index.js';
import { readyServer, ADMIN_KEY, type TestServer } from '../support/server.js';

type Json = any;

/** One operation of the document: method, path template and its Operation Object (references resolved). */
interface Documented {
  method: string;
  path: string;
  operation: Json;
}

interface Answer {
  status: number;
  body: Json;
  headers: Headers;
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'];
/** Small enough that the 413 of every operation with a body is cheap to provoke; the examples fit well inside. */
const MAX_BODY_BYTES = 16384;

/**
 * GET /admin/api/openapi.json: a valid OpenAPI 3.1 document of exactly the routes the Admin
 * router serves, and a contract every operation keeps against a running server: each is called
 * with the examples of the document itself, then with the errors it documents.
 */
describe('Admin API OpenAPI document', function () {
  let server: TestServer;
  let document: Json;
  /** The document with every $ref replaced by what it names (by the validator library). */
  let resolved: Json;
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  (addFormats as unknown as (ajv: Ajv2020) => void)(ajv);

  before(async function () {
    // Its own server, so that the examples' numeric references name the first record of each collection.
    server = await readyServer({ MAX_BODY_BYTES: String(MAX_BODY_BYTES) });
    const response = await server.admin('GET', '/openapi.json');
    expect(response.status).to.equal(200);
    document = response.body;
    const validator = new Validator();
    await validator.validate(structuredClone(document));
    resolved = validator.resolveRefs();
  });
  after(async function () {
    await server?.close();
  });

  const operations = (): Documented[] =>
    Object.entries(resolved.paths as Record<string, Json>).flatMap(([path, item]) =>
      Object.keys(item)
        .filter((method) => HTTP_METHODS.includes(method))
        .map((method) => ({ method, path, operation: item[method] })),
    );

  describe('the document', function () {
    it('is valid OpenAPI 3.1 for @seriousme/openapi-schema-validator, which refuses a broken copy', async function () {
      expect(document.openapi).to.match(/^3\.1\./);
      const result = await new Validator().validate(structuredClone(document));
      expect(result.valid, JSON.stringify(result.errors)).to.equal(true);
      const broken = structuredClone(document);
      broken.components.securitySchemes.adminApiKey.in = 'body';
      expect((await new Validator().validate(broken)).valid).to.equal(false);
    });

    it('requires the X-Admin-API-Key header on every operation, and names the server from the issuer', function () {
      expect(document.components.securitySchemes.adminApiKey).to.deep.include({
        type: 'apiKey',
        in: 'header',
        name: 'X-Admin-API-Key',
      });
      expect(document.security).to.deep.equal([{ adminApiKey: [] }]);
      for (const { method, path, operation } of operations()) {
        expect(operation.security, `${method} ${path} overrides the key`).to.equal(undefined);
        expect(operation.responses, `${method} ${path}`).to.have.property('401');
      }
      expect(document.servers).to.deep.equal([{ url: `${server.config.issuer}${ADMIN_PREFIX}` }]);
    });

    it("takes each collection's request body schema from the router's own (COLLECTIONS)", function () {
      for (const definition of COLLECTIONS) {
        const create = resolved.paths[`/${definition.path}`].post;
        expect(create.requestBody.content['application/json'].schema, definition.path).to.deep.equal(
          structuredClone(definition.schema),
        );
      }
    });

    it('describes impact analysis and shadow policies from the schemas their routes use', function () {
      const body = (path: string) => resolved.paths[path].post.requestBody.content['application/json'].schema;
      expect(body('/policy-impact')).to.deep.equal(structuredClone(POLICY_IMPACT_REQUEST_SCHEMA));
      expect(body('/policy-shadow/promote')).to.deep.equal(structuredClone(SHADOW_ACTION_SCHEMA));
      for (const name of Object.keys(POLICY_LAB_SCHEMAS))
        expect(document.components.schemas[name], name).to.deep.equal(
          structuredClone(POLICY_LAB_SCHEMAS[name as keyof typeof POLICY_LAB_SCHEMAS]),
        );
      const answer = resolved.paths['/policy-impact'].post.responses['200'].content['application/json'].schema;
      expect(answer.properties.changed.items.properties.kind.enum).to.deep.equal([
        'allow_to_deny',
        'deny_to_allow',
        'narrower',
        'wider',
        'other',
      ]);
    });
  });

  it('documents every route the Admin router registers with its method, and no other', async function () {
    // Listing the routes calls no engine: one that is never called stands in for OPA and Cedar.
    const policy = { explain: notCalled, revisions: notCalled };
    const router = adminRouter(server.store, {
      keys: new AdminApiKeys(server.store, ADMIN_KEY),
      sealer: await Sealer.open(server.store, null),
      maxBodyBytes: 1024,
      audit: new AuditLog(server.store),
      policy,
      issuer: server.config.issuer,
      policyLab: { lab: {} as never, fileChecks: {}, recordedInputs: notCalled },
    });
    const routed = router.stack.flatMap((layer) =>
      layer.methods
        .filter((method) => method !== 'HEAD')
        .map((method) => `${method} ${String(layer.path).slice(ADMIN_PREFIX.length).replace(/:\w+/g, '{}')}`),
    );
    const documented = operations().map(
      ({ method, path }) => `${method.toUpperCase()} ${path.replace(/\{\w+\}/g, '{}')}`,
    );
    expect(routed.length).to.be.greaterThan(COLLECTIONS.length * 5);
    expect([...documented].sort()).to.deep.equal([...new Set(routed)].sort());
  });

  describe('the contract, against the running server', function () {
    /** The record each path's first segment is about, for the path parameters (named like its fields). */
    const records: Record<string, Json> = {};

    // The collections, the Admin API keys (the example key, read-only, is the one the 403s are checked with) and the tenants.
    const collectionPaths = new Set([
      ...COLLECTIONS.map((definition) => `/${definition.path}`),
      '/api-keys',
      '/tenants',
    ]);
    const isCreate = ({ method, path }: Documented) => method === 'post' && collectionPaths.has(path);

    it("creates every collection's example (in reference order), an API key and a tenant as documented, with the documented errors", async function () {
      const creates = operations().filter(isCreate);
      expect(creates).to.have.length(COLLECTIONS.length + 2);
      await expectNoProblems(inReferenceOrder(creates));
    });

    it('answers every other operation but the deletes as documented, with the documented errors', async function () {
      // The audit entry the {id} operations name holds a decision (to replay): the playground's own, run with the document's example.
      const playground =
        resolved.paths['/decisions'].post.requestBody.content['application/json'].examples.example.value;
      expect((await server.admin('POST', '/decisions', playground)).status).to.equal(200);
      records['audit-logs'] = (
        await server.admin('GET', '/audit-logs?endpoint=/admin/api/decisions&size=1&sort=id,desc')
      ).body.content[0];
      await expectNoProblems(
        operations().filter((documented) => !isCreate(documented) && documented.method !== 'delete'),
      );
    });

    it('answers 403 insufficient_scope to a read-only key exactly where the document says, and lets it read', async function () {
      const readOnly = records['api-keys'];
      expect(readOnly.role).to.equal('read-only');
      const problems: string[] = [];
      let refused = 0;
      for (const documented of operations()) {
        const example = documented.operation.requestBody?.content['application/json'].examples.example.value;
        const answer = await call(documented, { body: example, key: readOnly.key });
        const what = `${documented.method.toUpperCase()} ${documented.path}`;
        if (documented.operation.responses['403']) {
          refused += 1;
          const problem = check(documented, answer, 403);
          if (problem) problems.push(`${what}: ${problem}`);
        } else if (answer.status === 403 || answer.status === 401) {
          problems.push(`${what}: a read was refused: ${answer.status} ${JSON.stringify(answer.body)}`);
        }
      }
      expect(problems, problems.join('\n')).to.deep.equal([]);
      expect(refused, 'every write of every collection, and the keys').to.be.greaterThan(COLLECTIONS.length * 3);
    });

    it('deletes as documented, with the documented errors', async function () {
      await expectNoProblems(operations().filter(({ method }) => method === 'delete'));
    });

    async function expectNoProblems(documented: Documented[]): Promise<void> {
      const problems: string[] = [];
      for (const each of documented)
        problems.push(
          ...(await exercise(each)).map((problem) => `${each.method.toUpperCase()} ${each.path}: ${problem}`),
        );
      expect(problems, problems.join('\n')).to.deep.equal([]);
    }

    /** The documented success, then each documented error this operation can be made to give. */
    async function exercise(documented: Documented): Promise<string[]> {
      const { operation } = documented;
      const example = operation.requestBody?.content['application/json'].examples.example.value;
      const problems: (string | null)[] = [];
      const success = await call(documented, { body: example });
      problems.push(check(documented, success, 'success'));
      if (isCreate(documented) && success.status === 201) records[documented.path.slice(1)] = success.body;

      const noKey = await call(documented, { body: example, key: false });
      problems.push(
        check(documented, noKey, 401),
        noKey.headers.get('www-authenticate') === 'X-Admin-API-Key'
          ? null
          : 'a 401 without WWW-Authenticate: X-Admin-API-Key',
      );
      if (operation.responses['400']) {
        // A body with a field too many; else a malformed tenant, or (server-wide operations) a malformed page.
        const takesTenant = (operation.parameters ?? []).some((parameter: Json) => parameter.name === 'tenantId');
        const [query, field] = takesTenant ? [{ tenantId: 'not a tenant' }, 'tenantId'] : [{ limit: '0' }, 'limit'];
        const bad = example
          ? await call(documented, { body: { ...example, notAField: true } })
          : await call(documented, { query });
        problems.push(check(documented, bad, 400), namesField(bad, example ? 'notAField' : field));
      }
      if (operation.responses['404'] && documented.path.includes('{'))
        problems.push(check(documented, await call(documented, { body: example, unknownRecord: true }), 404));
      if (operation.responses['409'] && isCreate(documented))
        problems.push(check(documented, await call(documented, { body: example }), 409));
      if (operation.responses['413'])
        problems.push(
          check(documented, await call(documented, { body: { ...example, padding: 'x'.repeat(MAX_BODY_BYTES) } }), 413),
        );
      if (operation.responses['415'])
        problems.push(check(documented, await call(documented, { body: example, contentType: 'text/plain' }), 415));
      return problems.filter((problem): problem is string => problem !== null);
    }

    interface CallOptions {
      body?: unknown;
      /** false: no key; a string: that key instead of the bootstrap key. */
      key?: boolean | string;
      query?: Record<string, string>;
      /** Path parameters that name no record. */
      unknownRecord?: boolean;
      contentType?: string;
    }

    async function call({ method, path, operation }: Documented, options: CallOptions): Promise<Answer> {
      const query = new URLSearchParams(options.query);
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in === 'query' && parameter.required) query.set(parameter.name, String(parameter.example));
      }
      const url = `${ADMIN_PREFIX}${path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(pathValue(path, name, operation, options.unknownRecord)))}`;
      const key = typeof options.key === 'string' ? options.key : ADMIN_KEY;
      const headers: Record<string, string> = options.key === false ? {} : { 'X-Admin-API-Key': key };
      if (options.body !== undefined) headers['Content-Type'] = options.contentType ?? 'application/json';
      const response = await server.request(`${url}${query.size > 0 ? `?${query}` : ''}`, {
        method: method.toUpperCase(),
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
    }

    /**
     * A path parameter: the field of that name of the record the test made (or saw) for the path's
     * first segment, else the parameter's documented example (a version number of the record).
     */
    function pathValue(path: string, name: string, operation: Json, unknown = false): string {
      const parameter = operation.parameters.find((each: Json) => each.name === name);
      if (unknown) return parameter.schema.type === 'integer' ? '999999999' : 'no-such-record';
      const record = records[path.split('/')[1]!];
      if (record?.[name] !== undefined) return String(record[name]);
      if (record && parameter.example !== undefined) return String(parameter.example);
      throw new Error(`no record for the {${name}} of ${path}`);
    }

    /** Null when the answer is a documented one (of the expected status) whose body matches its schema. */
    function check({ operation }: Documented, answer: Answer, expected: number | 'success'): string | null {
      const what = `${answer.status} ${JSON.stringify(answer.body)}`;
      const response = operation.responses[String(answer.status)];
      if (!response) return `answered an undocumented ${what}`;
      if (expected === 'success' ? answer.status >= 300 : answer.status !== expected)
        return `expected ${expected}, got ${what}`;
      const schema = response.content?.['application/json']?.schema;
      if (!schema) return answer.body === undefined ? null : `a ${answer.status} documented without a body has one`;
      const validate = validatorFor(schema);
      return validate(answer.body)
        ? null
        : `the ${answer.status} body does not match its schema: ${ajv.errorsText(validate.errors)} in ${what}`;
    }

    const validators = new Map<object, ValidateFunction>();
    function validatorFor(schema: object): ValidateFunction {
      if (!validators.has(schema)) validators.set(schema, ajv.compile(schema));
      return validators.get(schema)!;
    }
  });
});

async function notCalled(): Promise<never> {
  throw new Error('not called while listing routes');
}

function namesField(answer: Answer, field: string): string | null {
  return answer.body?.field === field ? null : `a 400 that does not name ${field}: ${JSON.stringify(answer.body)}`;
}

/** Creates ordered so that each collection's references name records created before it. */
function inReferenceOrder(creates: Documented[]): Documented[] {
  const pathOfStore = new Map(COLLECTIONS.map((definition) => [definition.store, definition.path]));
  const dependencies = new Map(
    COLLECTIONS.map((definition) => [
      definition.path,
      Object.values(definition.references ?? {})
        .map((store) => pathOfStore.get(store)!)
        .filter((path) => path !== definition.path),
    ]),
  );
  const ordered: string[] = [];
  const visit = (path: string): void => {
    if (ordered.includes(path)) return;
    for (const dependency of dependencies.get(path) ?? []) visit(dependency);
    ordered.push(path);
  };
  for (const definition of COLLECTIONS) visit(definition.path);
  return [...creates].sort((a, b) => ordered.indexOf(a.path.slice(1)) - ordered.indexOf(b.path.slice(1)));
}
