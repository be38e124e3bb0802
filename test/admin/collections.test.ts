import bcrypt from 'bcryptjs';
import { expect } from 'chai';
import { clientRecords, subjectRecords } from '../../src/catalog/index.js';
import { DEFAULT_TENANT } from '../../src/store/index.js';
import { clientCredentials } from '../support/oauth.js';
import { inProcess } from '../support/in-process.js';
import { withServer, type TestServer } from '../support/server.js';

const BCRYPT_HASH = bcrypt.hashSync('client-secret', 4);

/** A valid body for every collection, built from records the test created first where references are needed. */
interface Sample {
  path: string;
  /** Creates a valid body; `n` makes unique fields distinct. */
  body(n: number, refs: Refs): Record<string, unknown>;
  /** Field that addresses a record in the URL. */
  key(record: any): string;
  /** Field whose reuse is a 409 (none for resources). */
  unique?: string;
  /** A change made by the PUT test. */
  change: Record<string, unknown>;
  /** A body that breaks the schema, and the field the 400 must name. */
  bad: [Record<string, unknown>, string];
}

interface Refs {
  clientInternalId: number;
  resourceServerId: number;
  resourceTypeId: number;
}

const REGO = (n: number) => `package arbiter.sample${n}\n\nimport rego.v1\n\ndecision := {"allow": true}\n`;

const SAMPLES: Sample[] = [
  {
    path: 'identity-providers',
    body: (n) => ({
      issuer: `https://idp${n}.example.test`,
      idpId: `idp-${n}`,
      name: 'Upstream',
      clientId: 'arbiter',
      clientSecret: 'upstream-secret',
      scopes: ['openid', 'email'],
    }),
    key: (r) => r.idpId,
    unique: 'idpId',
    change: { name: 'Renamed upstream' },
    bad: [{ issuer: 42 }, 'issuer'],
  },
  {
    path: 'resource-servers',
    body: (n, refs) => ({
      resourceIndicator: `https://api${n}.example.test/`,
      name: 'API',
      capability: { introspect: true },
      clientId: refs.clientInternalId,
      typeUris: ['urn:example:doc'],
    }),
    key: (r) => String(r.id),
    unique: 'resourceIndicator',
    change: { description: 'documents API' },
    bad: [{ resourceIndicator: 'https://api.example.test/#frag' }, 'resourceIndicator'],
  },
  {
    path: 'resource-types',
    body: (n) => ({ typeUri: `urn:example:type:${n}`, name: 'Type', scopes: ['read', 'write'] }),
    key: (r) => String(r.id),
    unique: 'typeUri',
    change: { enabled: false },
    bad: [{ typeUri: 'urn:x', scopes: 'read' }, 'scopes'],
  },
  {
    path: 'resources',
    body: (n, refs) => ({
      resourceServerId: refs.resourceServerId,
      resourceTypeId: refs.resourceTypeId,
      resourceIdentifier: `doc-${n}`,
      scopes: ['read'],
    }),
    key: (r) => String(r.id),
    change: { scopes: ['read', 'write'] },
    bad: [{ resourceServerId: 1, resourceIdentifier: 'x' }, 'resourceTypeId'],
  },
  {
    path: 'clients',
    body: (n) => ({
      clientId: `client-${n}`,
      clientType: 'confidential',
      clientSecret: BCRYPT_HASH,
      redirectUris: ['https://app.example.test/cb'],
      clientName: 'App',
      scopes: ['read'],
    }),
    key: (r) => r.clientId,
    unique: 'clientId',
    change: { clientName: 'Renamed app' },
    bad: [{ clientId: 'c', clientType: 'secretive' }, 'clientType'],
  },
  {
    path: 'subjects',
    body: (n) => ({ subjectId: `user-${n}`, name: 'Alice' }),
    key: (r) => String(r.id),
    unique: 'subjectId',
    change: { email: 'alice@example.test' },
    bad: [{ subjectId: 'u', identityProviderId: 'one' }, 'identityProviderId'],
  },
  {
    path: 'policy-rules',
    body: (n) => ({ version: `v${n}`, kind: 'rego', path: `arbiter/sample${n}.rego`, content: REGO(n) }),
    key: (r) => String(r.id),
    unique: 'path',
    change: { enabled: false },
    bad: [{ version: 'v1', kind: 'prolog', path: 'x.rego', content: 'x' }, 'kind'],
  },
  {
    path: 'policy-data',
    body: (n) => ({ dataKey: `sample${n}`, payload: JSON.stringify({ n }), version: 'draft' }),
    key: (r) => String(r.id),
    unique: 'dataKey',
    change: { payload: '{"changed":true}' },
    bad: [{ dataKey: 'has space', payload: '{}' }, 'dataKey'],
  },
];

describe('Admin API collections', function () {
  let server: TestServer;
  let refs: Refs;
  let counter = 0;
  const next = () => ++counter;
  const clients = () => clientRecords(server.store, DEFAULT_TENANT);

  before(async function () {
    server = inProcess(await withServer());
    const client = await server.admin('POST', '/clients', SAMPLES[4]!.body(1000, {} as Refs));
    const type = await server.admin('POST', '/resource-types', SAMPLES[2]!.body(1000, {} as Refs));
    const rs = await server.admin('POST', '/resource-servers', {
      resourceIndicator: 'https://refs.example.test/',
      clientId: client.body.id,
    });
    refs = { clientInternalId: client.body.id, resourceTypeId: type.body.id, resourceServerId: rs.body.id };
  });

  for (const sample of SAMPLES) {
    describe(sample.path, function () {
      it('creates (201 with id, timestamps and defaults), reads, lists, replaces and deletes', async function () {
        const body = sample.body(next(), refs);
        const created = await server.admin('POST', `/${sample.path}`, body);
        expect(created.status, JSON.stringify(created.body)).to.equal(201);
        expect(created.body.id).to.be.a('number');
        expect(created.body.createdAt).to.be.a('string');
        expect(created.body.updatedAt).to.be.a('string');
        expect(created.body.tenantId).to.equal(null);
        const key = sample.key(created.body);

        const fetched = await server.admin('GET', `/${sample.path}/${encodeURIComponent(key)}`);
        expect(fetched.status).to.equal(200);
        expect(fetched.body).to.deep.equal(created.body);

        const listed = await server.admin('GET', `/${sample.path}`);
        expect(listed.status).to.equal(200);
        expect(listed.body.map((record: any) => record.id)).to.include(created.body.id);

        const replaced = await server.admin('PUT', `/${sample.path}/${encodeURIComponent(key)}`, {
          ...body,
          ...sample.change,
        });
        expect(replaced.status, JSON.stringify(replaced.body)).to.equal(200);
        expect(replaced.body.id).to.equal(created.body.id);
        expect(replaced.body.createdAt).to.equal(created.body.createdAt);
        for (const [field, value] of Object.entries(sample.change)) expect(replaced.body[field]).to.deep.equal(value);

        const deleted = await server.admin('DELETE', `/${sample.path}/${encodeURIComponent(key)}`);
        expect(deleted.status).to.equal(204);
        expect((await server.admin('GET', `/${sample.path}/${encodeURIComponent(key)}`)).status).to.equal(404);
        expect((await server.admin('DELETE', `/${sample.path}/${encodeURIComponent(key)}`)).status).to.equal(404);
      });

      it('answers 400 naming the field for a body that breaks the schema, and stores nothing', async function () {
        const before = (await server.admin('GET', `/${sample.path}`)).body.length;
        const [badBody, field] = sample.bad;
        const response = await server.admin('POST', `/${sample.path}`, badBody);
        expect(response.status).to.equal(400);
        expect(response.body.error).to.equal('invalid_request');
        expect(response.body.field).to.equal(field);
        expect(response.body.error_description).to.contain(field);
        expect((await server.admin('GET', `/${sample.path}`)).body.length).to.equal(before);
      });

      it('refuses unknown fields with 400', async function () {
        const response = await server.admin('POST', `/${sample.path}`, {
          ...sample.body(next(), refs),
          surprise: true,
        });
        expect(response.status).to.equal(400);
        expect(response.body.field).to.equal('surprise');
      });

      it('answers 404 for an unknown identifier on GET, PUT and DELETE', async function () {
        expect((await server.admin('GET', `/${sample.path}/999999`)).status).to.equal(404);
        expect((await server.admin('PUT', `/${sample.path}/999999`, sample.body(next(), refs))).status).to.equal(404);
        expect((await server.admin('DELETE', `/${sample.path}/999999`)).status).to.equal(404);
      });

      if (sample.unique) {
        const unique = sample.unique;
        it(`answers 409 when ${unique} is reused within a tenant, and allows it in another tenant`, async function () {
          const body = sample.body(next(), refs);
          expect((await server.admin('POST', `/${sample.path}`, body)).status).to.equal(201);
          const clash = await server.admin('POST', `/${sample.path}`, body);
          expect(clash.status).to.equal(409);
          expect(clash.body.error).to.equal('conflict');
          if (sample.path === 'resource-servers') return; // its clientId reference lives in the default tenant only
          const elsewhere = await server.admin('POST', `/${sample.path}`, { ...body, tenantId: 'tenant-b' });
          expect(elsewhere.status, JSON.stringify(elsewhere.body)).to.equal(201);
          expect(elsewhere.body.tenantId).to.equal('tenant-b');
        });
      }
    });
  }

  describe('tenant scoping', function () {
    it('shows a tenant only its own records, by tenantId query or X-Tenant-Id', async function () {
      const created = await server.admin('POST', '/subjects', { subjectId: 'tenant-only-user', tenantId: 'tenant-c' });
      expect(created.status).to.equal(201);
      const inDefault = await server.admin('GET', '/subjects');
      expect(inDefault.body.map((s: any) => s.subjectId)).not.to.include('tenant-only-user');
      expect((await server.admin('GET', `/subjects/${created.body.id}`)).status).to.equal(404);
      const byQuery = await server.admin('GET', '/subjects?tenantId=tenant-c');
      expect(byQuery.body.map((s: any) => s.subjectId)).to.deep.equal(['tenant-only-user']);
      const byHeader = await server.admin('GET', `/subjects/${created.body.id}`, undefined, {
        'X-Tenant-Id': 'tenant-c',
      });
      expect(byHeader.status).to.equal(200);
      expect((await server.admin('DELETE', `/subjects/${created.body.id}`)).status).to.equal(404);
    });

    it('GET one client takes tenantId', async function () {
      await server.admin('POST', '/clients', { clientId: 'shared-name', clientType: 'public', tenantId: 'tenant-d' });
      expect((await server.admin('GET', '/clients/shared-name')).status).to.equal(404);
      const found = await server.admin('GET', '/clients/shared-name?tenantId=tenant-d');
      expect(found.status).to.equal(200);
      expect(found.body.tenantId).to.equal('tenant-d');
    });

    it('rejects a malformed tenant id with 400', async function () {
      expect((await server.admin('GET', '/subjects?tenantId=bad%20tenant')).status).to.equal(400);
      const response = await server.request('/.well-known/openid-configuration', {
        headers: { 'X-Tenant-Id': '../etc' },
      });
      expect(response.status).to.equal(400);
      expect(((await response.json()) as any).error).to.equal('invalid_request');
    });
  });

  describe('clients and secrets', function () {
    it('takes a secret in clear and stores only its BCrypt hash, which then authenticates the client', async function () {
      const created = await server.admin('POST', '/clients', {
        clientId: 'plain-secret',
        clientType: 'confidential',
        clientSecret: 'hunter2-in-clear',
        scopes: ['read'],
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect(JSON.stringify(created.body)).not.to.contain('hunter2');
      const stored = (await clients().findOne({ clientId: 'plain-secret' }))!;
      expect(bcrypt.compareSync('hunter2-in-clear', stored.clientSecret as string)).to.equal(true);
      expect(JSON.stringify(stored)).not.to.contain('hunter2');
      expect((await clientCredentials(server, 'plain-secret', 'hunter2-in-clear', { scope: 'read' })).status).to.equal(
        200,
      );
      // A secret BCrypt would cut short (over 72 bytes) is refused, without echoing it.
      const long = await server.admin('POST', '/clients', {
        clientId: 'long-secret',
        clientType: 'confidential',
        clientSecret: `${'é'.repeat(36)}x`,
      });
      expect(long.status).to.equal(400);
      expect(long.body.field).to.equal('clientSecret');
      expect(long.body.error_description).to.match(/72 bytes/);
      expect(JSON.stringify(long.body)).not.to.contain('é');
      expect(
        (
          await server.admin('POST', '/clients', {
            clientId: 'empty-secret',
            clientType: 'confidential',
            clientSecret: '',
          })
        ).status,
      ).to.equal(400);
    });

    it('generates a secret when asked, shows it once, and a replace that asks again rotates it', async function () {
      const created = await server.admin('POST', '/clients', {
        clientId: 'generated-secret',
        clientType: 'confidential',
        generateClientSecret: true,
        scopes: ['read'],
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const first = created.body.generatedClientSecret as string;
      expect(first).to.match(/^[A-Za-z0-9]{43}$/);
      expect(created.body).not.to.have.property('generateClientSecret');
      expect(created.body).not.to.have.property('clientSecret');
      const stored = (await clients().findOne({ clientId: 'generated-secret' }))!;
      expect(stored).not.to.have.property('generateClientSecret');
      expect(JSON.stringify(stored)).not.to.contain(first);
      const fetched = await server.admin('GET', '/clients/generated-secret');
      expect(JSON.stringify(fetched.body)).not.to.contain(first);
      expect(fetched.body).not.to.have.property('generatedClientSecret');
      expect((await clientCredentials(server, 'generated-secret', first, { scope: 'read' })).status).to.equal(200);

      const rotated = await server.admin('PUT', '/clients/generated-secret', {
        clientId: 'generated-secret',
        clientType: 'confidential',
        generateClientSecret: true,
        scopes: ['read'],
      });
      expect(rotated.status, JSON.stringify(rotated.body)).to.equal(200);
      const second = rotated.body.generatedClientSecret as string;
      expect(second)
        .to.match(/^[A-Za-z0-9]{43}$/)
        .and.not.equal(first);
      expect((await clientCredentials(server, 'generated-secret', first, { scope: 'read' })).status).to.equal(401);
      expect((await clientCredentials(server, 'generated-secret', second, { scope: 'read' })).status).to.equal(200);
    });

    it('refuses a secret both given and to be generated, and one generated for a public client', async function () {
      for (const body of [
        { clientId: 'both-secrets', clientType: 'confidential', clientSecret: 'given', generateClientSecret: true },
        { clientId: 'public-secret', clientType: 'public', generateClientSecret: true },
      ]) {
        const refused = await server.admin('POST', '/clients', body);
        expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
        expect(refused.body.field).to.equal('generateClientSecret');
        expect((await server.admin('POST', '/clients/validate', body)).status).to.equal(400);
      }
    });

    it('never returns a client secret or its hash', async function () {
      const created = await server.admin('POST', '/clients', {
        clientId: 'hashed',
        clientType: 'confidential',
        clientSecret: BCRYPT_HASH,
      });
      const fetched = await server.admin('GET', '/clients/hashed');
      const listed = await server.admin('GET', '/clients');
      for (const body of [created.body, fetched.body, listed.body]) {
        expect(JSON.stringify(body)).not.to.contain('$2b$');
        expect(JSON.stringify(body)).not.to.contain('clientSecret');
      }
    });

    it('never returns an upstream identity provider secret', async function () {
      const created = await server.admin('POST', '/identity-providers', {
        issuer: 'https://secretive.example.test',
        clientSecret: 'top-secret-value',
      });
      expect(created.status).to.equal(201);
      expect(created.body.idpId).to.be.a('string').and.not.empty;
      expect(JSON.stringify(created.body)).not.to.contain('top-secret-value');
    });

    it('keeps a stored secret when a replace leaves it out (it was never shown, so it cannot be sent back)', async function () {
      const secret = 'kept-secret';
      await server.admin('POST', '/clients', {
        clientId: 'kept',
        clientType: 'confidential',
        clientSecret: bcrypt.hashSync(secret, 4),
        scopes: ['read'],
      });
      const replaced = await server.admin('PUT', '/clients/kept', {
        clientId: 'kept',
        clientType: 'confidential',
        scopes: ['read'],
        clientName: 'Renamed',
      });
      expect(replaced.status, JSON.stringify(replaced.body)).to.equal(200);
      expect(replaced.body).to.include({ clientName: 'Renamed' }).and.not.to.have.property('clientSecret');
      const token = await clientCredentials(server, 'kept', secret, { scope: 'read' });
      expect(token.status, JSON.stringify(token.body)).to.equal(200);
      // A secret that is sent replaces the stored one.
      await server.admin('PUT', '/clients/kept', {
        clientId: 'kept',
        clientType: 'confidential',
        scopes: ['read'],
        clientSecret: bcrypt.hashSync('new-secret', 4),
      });
      expect((await clientCredentials(server, 'kept', secret, { scope: 'read' })).status).to.equal(401);
      expect((await clientCredentials(server, 'kept', 'new-secret', { scope: 'read' })).status).to.equal(200);
    });
  });

  describe('a subject made by a sign-in', function () {
    it('is PUT back unchanged as GET answers it, emailVerified included (issue 37.7)', async function () {
      // As the sign-in stores it (src/oauth/interactions/subjects.ts): the upstream's claims, email_verified too.
      const id = await server.store.nextSequence(subjectRecords.spec.name);
      const now = new Date().toISOString();
      await subjectRecords(server.store, DEFAULT_TENANT).insert({
        id,
        tenantId: null,
        createdAt: now,
        updatedAt: now,
        subjectId: 'signed-in-sub',
        name: 'Signed In',
        email: 'signed@in.example',
        emailVerified: true,
      } as never);
      const read = await server.admin('GET', `/subjects/${id}`);
      expect(read.status).to.equal(200);
      expect(read.body).to.include({ emailVerified: true });
      const put = await server.admin('PUT', `/subjects/${id}`, read.body);
      expect(put.status, JSON.stringify(put.body)).to.equal(200);
      expect(put.body).to.include({ subjectId: 'signed-in-sub', emailVerified: true });
      const bad = await server.admin('PUT', `/subjects/${id}`, { ...put.body, emailVerified: 'yes' });
      expect(bad.status).to.equal(400);
      expect(bad.body.field).to.equal('emailVerified');
    });
  });

  describe('references', function () {
    it('refuses a resource whose resourceServerId names no resource server', async function () {
      const response = await server.admin('POST', '/resources', {
        resourceServerId: 987654,
        resourceTypeId: refs.resourceTypeId,
        resourceIdentifier: 'x',
      });
      expect(response.status).to.equal(400);
      expect(response.body.field).to.equal('resourceServerId');
    });
  });

  describe('bad requests', function () {
    it('answers 400 for malformed JSON and 415 for a non-JSON body', async function () {
      const malformed = await server.request('/admin/api/subjects', {
        method: 'POST',
        admin: true,
        headers: { 'Content-Type': 'application/json' },
        body: '{"subjectId":',
      });
      expect(malformed.status).to.equal(400);
      expect(((await malformed.json()) as any).error_description).to.contain('JSON');
      const form = await server.request('/admin/api/subjects', {
        method: 'POST',
        admin: true,
        headers: { 'Content-Type': 'text/plain' },
        body: 'x',
      });
      expect(form.status).to.equal(415);
    });

    it('answers 413 for an oversized body', async function () {
      const huge = { subjectId: 'x', name: 'y'.repeat(2 * 1024 * 1024) };
      const response = await server.request('/admin/api/subjects', { method: 'POST', admin: true, json: huge });
      expect(response.status).to.equal(413);
    });

    it('answers 400 for a JSON array or a non-object body', async function () {
      expect((await server.admin('POST', '/subjects', [1, 2])).status).to.equal(400);
      expect((await server.admin('POST', '/subjects', 'text')).status).to.equal(400);
    });
  });
});

describe('Admin API lists are paged', function () {
  let server: TestServer;
  const tenant = `paging-${Math.random().toString(36).slice(2, 8)}`;

  before(async function () {
    server = inProcess(await withServer());
    for (let index = 0; index < 5; index += 1) {
      const created = await server.admin(
        'POST',
        '/resource-types',
        { typeUri: `urn:paging:${tenant}:${index}`, name: `t${index}`, scopes: ['read'] },
        { 'X-Tenant-Id': tenant },
      );
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
    }
  });

  it('answers at most `limit` records, and the Link header walks every record exactly once', async function () {
    const seen: string[] = [];
    let next: string | null = '/admin/api/resource-types?limit=2';
    let pages = 0;
    while (next) {
      const response: Response = await server.request(next, { admin: true, tenant });
      expect(response.status).to.equal(200);
      const page = (await response.json()) as { typeUri: string }[];
      expect(page.length).to.be.at.most(2);
      seen.push(...page.map((record) => record.typeUri));
      next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1] ?? null;
      pages += 1;
    }
    expect(pages).to.equal(3);
    expect(seen.filter((uri) => uri.startsWith(`urn:paging:${tenant}:`)).sort()).to.deep.equal(
      [0, 1, 2, 3, 4].map((index) => `urn:paging:${tenant}:${index}`),
    );
    expect(new Set(seen).size).to.equal(seen.length);
  });

  it('refuses a limit or offset that is not a whole number in range with 400', async function () {
    for (const query of ['limit=0', 'limit=1001', 'limit=x', 'offset=-1', 'offset=1e3']) {
      const response = await server.request(`/admin/api/resource-types?${query}`, { admin: true, tenant });
      expect(response.status, query).to.equal(400);
    }
  });
});
