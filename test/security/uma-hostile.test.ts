import { expect } from 'chai';
import fc from 'fast-check';
import { Agent, maxHeaderSize, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { DELEGATION_REQUEST } from '../../src/delegation/schemas.js';
import { MAX_JSON_DEPTH } from '../../src/http/body.js';
import { MAX_TICKET_PERMISSIONS, RESOURCE_DESCRIPTION } from '../../src/uma/schemas.js';
import { basic, clientCredentials, clientToken, confidentialClient, postForm } from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';
import { ACCESS_TOKEN_FORMAT, api, UMA_GRANT } from '../uma/support.js';
import { headerSafe, hostileJson, hostileName, hostileText, malformedJson, pathSegment } from './arbitraries.js';

/**
 * Hostile input against the UMA protection API (resource registration, permission tickets),
 * the delegation store and the UMA grant at /token, through real HTTP: generated bodies, path
 * ids, Authorization headers and grant parameters never get a 5xx, every refusal is a JSON
 * `{error, error_description, field?}` with one of the codes these APIs define, nobody reaches
 * another owner's (or another tenant's) records, and a permission ticket is redeemed once even
 * under concurrent redemptions.
 *
 * UMA_FUZZ_SEED replays a seed fast-check reported; UMA_FUZZ_STATS=1 prints the answers each
 * property got (status and error code; for bodies, the description too), to see how deep the
 * generated input reaches.
 */
const RUNS = 50;
const SEED = process.env.UMA_FUZZ_SEED === undefined ? undefined : Number(process.env.UMA_FUZZ_SEED);
const MAX_BODY_BYTES = 4096;
const RESOURCES = '/resource_registration/resource';
const DOC_TYPE = 'https://docs.example.test/document';
const ID_TOKEN_FORMAT = 'http://openid.net/specs/openid-connect-core-1_0.html#IDToken';

/** Every error code the protection API and the delegation store may answer with. */
const API_CODES = [
  'invalid_request',
  'invalid_scope',
  'invalid_resource_id',
  'not_found',
  'access_denied',
  'request_denied',
  'insufficient_scope',
  'invalid_token',
  'unsupported_method_type',
] as const;
const GRANT_CODES = ['invalid_request', 'invalid_grant', 'need_info', 'request_denied'] as const;

/** Refusals that concern the body as a whole or a decision, not one field of it (no `field` expected). */
const NOT_A_FIELD =
  /not valid JSON|nests arrays|must be application\/json|exceeds \d+ bytes|revoked delegation|resource is not registered|must be in the future/;
/** Internals a caller must never see. */
const LEAK = /node_modules|\/work\/main|\.[cm]?[jt]s:\d+:\d+|\bat (?:async )?\w+ \(/;

const STATS = new Map<string, Map<string, number>>();

function tally(property: string, status: number, error: unknown): void {
  if (!process.env.UMA_FUZZ_STATS) return;
  const counts = STATS.get(property) ?? new Map<string, number>();
  const key = `${status}${typeof error === 'string' ? ` ${error}` : ''}`;
  counts.set(key, (counts.get(key) ?? 0) + 1);
  STATS.set(property, counts);
}

// ---------------------------------------------------------------------------------------------
// Requests sent byte for byte (duplicate headers, raw paths, chunked bodies)

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: any;
}

interface Req {
  method: string;
  path: string;
  headers?: [string, string][];
  body?: string;
  chunked?: boolean;
}

const agent = new Agent({ keepAlive: true, maxSockets: 8 });

function send(server: TestServer, req: Req): Promise<Answer> {
  const { hostname, port, host } = new URL(server.url);
  const body = req.body === undefined ? undefined : Buffer.from(req.body, 'utf8');
  const headers: string[] = ['Host', host];
  for (const [name, value] of req.headers ?? []) headers.push(name, value);
  if (body !== undefined)
    headers.push(...(req.chunked ? ['Transfer-Encoding', 'chunked'] : ['Content-Length', String(body.length)]));
  const big = body !== undefined && body.length > MAX_BODY_BYTES;
  return new Promise((resolve, reject) => {
    let answered = false;
    const outgoing = httpRequest(
      { host: hostname, port, method: req.method, path: req.path, headers, agent, timeout: 15_000 },
      (incoming) => {
        answered = true;
        const chunks: Buffer[] = [];
        incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
        incoming.on('error', reject);
        incoming.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = text ? JSON.parse(text) : undefined;
          } catch {
            json = undefined;
          }
          resolve({ status: incoming.statusCode ?? 0, headers: incoming.headers, text, json });
        });
      },
    );
    outgoing.on('timeout', () => outgoing.destroy(new Error('no answer within 15 s')));
    outgoing.on('error', (error: NodeJS.ErrnoException) => {
      if (answered) return;
      // An oversized body may be answered (413, Connection: close) before it is all written.
      if (big && (error.code === 'EPIPE' || error.code === 'ECONNRESET'))
        resolve({
          status: 413,
          headers: {},
          text: '',
          json: { error: 'invalid_request', error_description: 'connection closed on an oversized body' },
        });
      else reject(error);
    });
    if (body !== undefined && req.chunked) {
      for (let at = 0; at < body.length; at += 1024) outgoing.write(body.subarray(at, at + 1024));
      outgoing.end();
    } else {
      outgoing.end(body);
    }
  });
}

const bearer = (token: string): [string, string] => ['Authorization', `Bearer ${token}`];
const JSON_TYPE: [string, string] = ['Content-Type', 'application/json'];

function describeReq(req: Req): string {
  const body =
    req.body === undefined
      ? ''
      : ` ${req.body.length > 400 ? `${req.body.slice(0, 400)}… (${req.body.length} chars)` : req.body}`;
  const headers = (req.headers ?? [])
    .map(([name, value]) => `${name}: ${value.length > 80 ? `${value.slice(0, 80)}…` : value}`)
    .join(' | ');
  return `${req.method} ${req.path.length > 300 ? `${req.path.slice(0, 300)}…` : req.path} [${headers}]${body}`;
}

/** Percent-decoding until nothing changes (as the Admin gate does before it decides whether a path is its own). */
function fullyDecoded(path: string): string {
  let decoded = path;
  for (let round = 0; round < 5; round++) {
    let next: string;
    try {
      next = decodeURIComponent(decoded);
    } catch {
      break;
    }
    if (next === decoded) break;
    decoded = next;
  }
  return decoded;
}

/**
 * A path id whose decoded form climbs into /admin/api (`..%2F..%2Fadmin%2Fapi`) is kept by the
 * Admin gate, which fails closed: 401 `unauthorized` without the Admin key. Any other path
 * must be answered by the API it names.
 */
function adminGateRefusal(req: Req, answer: Answer): boolean {
  if (answer.status !== 401 || answer.json?.error !== 'unauthorized') return false;
  expect(
    fullyDecoded(req.path),
    `the Admin gate answered a path that does not lead to it: ${describeReq(req)}`,
  ).to.match(/\/admin(\/|$)/i);
  return true;
}

/** Never a 5xx; a refusal is JSON with a string `error` among `codes`, a string description, and a string `field` if any. */
function expectWellFormed(req: Req, answer: Answer, codes: readonly string[]): void {
  const where = `${describeReq(req)}\n  → ${answer.status} ${answer.text.slice(0, 500)}`;
  expect(answer.status, where).to.be.at.least(200).and.below(500);
  expect(answer.text, `the answer shows internals: ${where}`).not.to.match(LEAK);
  if (answer.status >= 400) {
    expect(answer.json, `a ${answer.status} that is not a JSON object: ${where}`)
      .to.be.an('object')
      .and.not.be.an('array');
    expect(answer.json.error, where)
      .to.be.a('string')
      .and.to.be.oneOf(codes as unknown as string[]);
    expect(answer.json.error_description, where).to.be.a('string');
    if ('field' in answer.json) expect(answer.json.field, where).to.be.a('string');
  }
}

/**
 * A schema refusal of an object body names the field at fault: one of the body's keys (or a
 * path below one), or a field of the schema (a missing one).
 */
function expectFieldNamed(req: Req, answer: Answer, schemaFields: string[]): void {
  if (
    answer.status !== 400 ||
    answer.json?.error !== 'invalid_request' ||
    NOT_A_FIELD.test(answer.json.error_description)
  )
    return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(req.body ?? '');
  } catch {
    return;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return;
  const where = `${describeReq(req)}\n  → ${answer.status} ${answer.text.slice(0, 500)}`;
  const field = answer.json.field;
  expect(field, `a 400 on an object body without a field: ${where}`).to.be.a('string');
  const named =
    Object.keys(parsed).some((key) => namesPathUnder(field, key)) || schemaFields.includes(field.split('.')[0]);
  expect(
    named,
    `field ${JSON.stringify(field)} is neither a key of the body nor a field of the schema: ${where}`,
  ).to.equal(true);
}

/**
 * Whether a refusal's field names the body's key or a path under it. A path longer than 64 characters is
 * named cut to 64 and "…" (http/errors.ts shownName), so it names the key when the cut part agrees with it.
 */
function namesPathUnder(field: string, key: string): boolean {
  if (field === key || field.startsWith(`${key}.`)) return true;
  if (!field.endsWith('…')) return false;
  const cut = field.slice(0, -1);
  return cut.length === 64 && (key.startsWith(cut) || cut.startsWith(`${key}.`));
}

/** JSON text for a body: usually JSON.stringify, sometimes with prototype-pollution keys spliced in, sometimes not JSON. */
function bodyText(value: fc.Arbitrary<unknown>): fc.Arbitrary<string> {
  const polluted = '"__proto__":{"polluted":true,"isAdmin":true},"constructor":{"prototype":{"polluted":true}}';
  return fc.oneof(
    { weight: 12, arbitrary: value.map((body) => JSON.stringify(body) ?? 'null') },
    {
      weight: 1,
      arbitrary: value.map((body) => {
        const text = JSON.stringify(body) ?? '{}';
        return text.startsWith('{') ? `{${polluted}${text === '{}' ? '' : ','}${text.slice(1)}` : `{${polluted}}`;
      }),
    },
    { weight: 1, arbitrary: malformedJson },
  );
}

/** A value that breaks a field: another JSON type, hostile text, a string over every maxLength, unicode. */
const badValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileJson },
  { weight: 1, arbitrary: fc.constantFrom(257, 2049).map((length) => '\u00fc'.repeat(length)) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 24 }) },
  // Near misses: a URI that is not one, scopes that are not scope tokens or repeat.
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'not a uri',
      'javascript:alert(1)',
      'https://',
      '',
      ['\u00e9'],
      ['a b'],
      ['read', 'read'],
      [''],
      ['"'],
      ['x'.repeat(257)],
      Array.from({ length: 101 }, (_, n) => `s${n}`),
    ),
  },
);

/** Unknown fields, owner fields a caller must not set, and prototype keys. */
const extraFields: fc.Arbitrary<Record<string, unknown>> = fc.dictionary(
  fc.oneof(
    hostileName,
    fc.constantFrom(
      '__proto__',
      'constructor',
      'prototype',
      '_id',
      'id',
      'owner',
      'ownerSub',
      'ownerClientId',
      'revokedAt',
      'status',
    ),
  ),
  hostileJson,
  { minKeys: 1, maxKeys: 2 },
);

/**
 * A body that is valid as generated (so that it reaches the decisions and the store behind the
 * schema), or that with one field broken, one required field left out, unknown fields added,
 * or (rarely) any JSON value at all.
 */
function objectBody(valid: fc.Arbitrary<Record<string, unknown>>, fieldNames: string[]): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 5, arbitrary: valid },
    {
      weight: 4,
      arbitrary: fc
        .tuple(valid, fc.constantFrom(...fieldNames), badValue)
        .map(([body, name, value]) => ({ ...body, [name]: value })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(valid, fc.constantFrom(...fieldNames))
        .map(([body, name]) => Object.fromEntries(Object.entries(body).filter(([key]) => key !== name))),
    },
    { weight: 1, arbitrary: fc.tuple(valid, extraFields).map(([body, extra]) => ({ ...extra, ...body })) },
    { weight: 1, arbitrary: hostileJson },
  );
}

const nested = (depth: number, inner: string) => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;

describe('UMA protection API, delegation store and UMA grant under hostile input', function () {
  let server: TestServer;
  let ownerSecret: string;
  let requesterSecret: string;
  let acmeSecret: string;
  let ownerPat: string;
  let ownerDm: string;
  let otherPat: string;
  let otherDm: string;
  let acmePat: string;
  let acmeDm: string;
  /** The owner's resources: one plain, one of DOC_TYPE, one the body property may replace. */
  let ownerResource: string;
  let typedResource: string;
  let putResource: string;
  /** Another owner's resource and delegation: never to be reached with the owner's tokens. */
  let otherResource: string;
  let otherDelegation: string;
  let ownerDelegation: string;
  let putDelegation: string;
  let ownerRpt: string;

  const future = (ms = 3_600_000) => new Date(Date.now() + ms).toISOString();

  before(async function () {
    server = await readyServer({ TENANTS: 'acme', MAX_BODY_BYTES: String(MAX_BODY_BYTES) });
    expect(
      (await server.admin('POST', '/resource-types', { typeUri: DOC_TYPE, scopes: ['read', 'write', 'share'] })).status,
    ).to.equal(201);
    const scopes = ['uma_protection', 'delegation_management'];
    ownerSecret = await confidentialClient(server, 'owner-rs', { scopes });
    const otherSecret = await confidentialClient(server, 'other-rs', { scopes });
    requesterSecret = await confidentialClient(server, 'requester', { scopes: ['openid'] });
    acmeSecret = await confidentialClient(server, 'acme-rs', { scopes }, 'acme');
    const PAT = { resource: 'urn:as:introspect', scope: 'uma_protection' };
    const DM = { resource: 'urn:as:delegation', scope: 'delegation_management' };
    ownerPat = await clientToken(server, 'owner-rs', ownerSecret, PAT);
    ownerDm = await clientToken(server, 'owner-rs', ownerSecret, DM);
    otherPat = await clientToken(server, 'other-rs', otherSecret, PAT);
    otherDm = await clientToken(server, 'other-rs', otherSecret, DM);
    const acmeToken = async (form: Record<string, string>) => {
      const answer = await clientCredentials(server, 'acme-rs', acmeSecret, form, { 'X-Tenant-Id': 'acme' });
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      return answer.body.access_token as string;
    };
    acmePat = await acmeToken(PAT);
    acmeDm = await acmeToken(DM);

    const register = async (token: string, body: unknown) => {
      const answer = await api(server, 'POST', RESOURCES, token, body);
      expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
      return answer.body._id as string;
    };
    ownerResource = await register(ownerPat, { name: 'Owner secret', resource_scopes: ['read', 'write'] });
    typedResource = await register(ownerPat, {
      name: 'Owner document',
      type: DOC_TYPE,
      resource_scopes: ['read', 'share'],
    });
    putResource = await register(ownerPat, { name: 'Owner scratch', resource_scopes: ['read'] });
    otherResource = await register(otherPat, { name: 'Other secret', resource_scopes: ['read', 'write'] });
    const delegate = async (token: string, body: unknown) => {
      const answer = await api(server, 'POST', '/delegation', token, body);
      expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
      return answer.body.delegation_id as string;
    };
    ownerDelegation = await delegate(ownerDm, {
      grantee_type: 'subject',
      grantee_subject_id: 'bob',
      resource_id: ownerResource,
      scopes: ['read'],
      expires_at: future(),
    });
    putDelegation = await delegate(ownerDm, {
      grantee_type: 'client',
      grantee_client_id: 'requester',
      resource_id: ownerResource,
      scopes: ['read', 'write'],
      expires_at: future(),
    });
    otherDelegation = await delegate(otherDm, {
      grantee_type: 'subject',
      grantee_subject_id: 'mallory',
      resource_id: otherResource,
      scopes: ['read'],
      expires_at: future(),
    });

    const ticket = await ticketFor(ownerPat, { resource_id: typedResource, resource_scopes: ['read'] });
    const rpt = await redeem('owner-rs', { ticket });
    expect(rpt.status, JSON.stringify(rpt.body)).to.equal(200);
    ownerRpt = rpt.body.access_token;
  });

  after(async function () {
    for (const [property, counts] of STATS)
      console.log(
        `${property}: ${[...counts]
          .sort((a, b) => b[1] - a[1])
          .map(([key, count]) => `${key} ×${count}`)
          .join(', ')}`,
      );
    agent.destroy();
    await server?.close();
  });

  async function ticketFor(pat: string, permissions: unknown): Promise<string> {
    const answer = await api(server, 'POST', '/permission', pat, permissions);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(201);
    return answer.body.ticket;
  }

  function redeem(client: 'owner-rs' | 'requester', form: Record<string, string>) {
    const secret = client === 'owner-rs' ? ownerSecret : requesterSecret;
    return postForm(server, '/token', { grant_type: UMA_GRANT, ...form }, { Authorization: basic(client, secret) });
  }

  // -------------------------------------------------------------------------------------------
  // 1. Bodies

  describe('hostile JSON bodies', function () {
    const validScopes = ['read', 'write', 'share', 'view', 'print', 'urn:x:y'];
    const scopeList = (minLength = 0) => fc.uniqueArray(fc.constantFrom(...validScopes), { minLength, maxLength: 3 });
    const resourceId = () =>
      fc.constantFrom(
        ownerResource,
        ownerResource,
        typedResource,
        putResource,
        otherResource,
        'no-such-resource',
        ownerResource.toUpperCase(),
      );
    /** A resource id with scopes: mostly among the resource's own (so that decisions allow), sometimes any. */
    const registeredScopes: Record<string, string[]> = {};
    const onResource = (scopesField: string) =>
      resourceId().chain((id) => {
        const own = registeredScopes[id] ?? [];
        const scopes = own.length
          ? fc.oneof(
              { weight: 3, arbitrary: fc.subarray(own, { minLength: 1 }) },
              { weight: 1, arbitrary: scopeList(1) },
            )
          : scopeList(1);
        return scopes.map((chosen) => ({ resource_id: id, [scopesField]: chosen }));
      });
    before(function () {
      Object.assign(registeredScopes, {
        [ownerResource]: ['read', 'write'],
        [typedResource]: ['read', 'share'],
        [putResource]: ['read'],
        [otherResource]: ['read', 'write'],
      });
    });
    const text = fc.oneof(
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 24 }),
      fc.constantFrom('__proto__', 'constructor', '<script>', "' OR '1'='1", '{"$ne":null}', '\u202Eevil', '\u{1F600}'),
    );

    const resourceDescription = () =>
      objectBody(
        fc.record(
          {
            name: text,
            type: fc.constantFrom(DOC_TYPE, DOC_TYPE, 'https://other.example.test/type', 'urn:x:type'),
            resource_scopes: scopeList(),
            description: text,
            icon_uri: fc.constantFrom('https://127.0.0.1:1/icon.png', 'http://127.0.0.1:1/i'),
          },
          { requiredKeys: [] },
        ),
        Object.keys(RESOURCE_DESCRIPTION.properties),
      );

    const permission = () => objectBody(onResource('resource_scopes'), ['resource_id', 'resource_scopes']);
    const permissionRequest = () =>
      fc.oneof(
        { weight: 6, arbitrary: permission() },
        { weight: 3, arbitrary: fc.array(permission(), { minLength: 1, maxLength: 4 }) },
        {
          weight: 1,
          arbitrary: fc
            .integer({ min: MAX_TICKET_PERMISSIONS, max: MAX_TICKET_PERMISSIONS + 2 })
            .map((count) =>
              Array.from({ length: count }, () => ({ resource_id: ownerResource, resource_scopes: ['read'] })),
            ),
        },
        { weight: 1, arbitrary: fc.constant([]) },
      );

    const expiresAt = () =>
      fc.oneof(
        { weight: 3, arbitrary: fc.integer({ min: -86_400_000, max: 86_400_000 * 365 }).map((ms) => future(ms)) },
        { weight: 1, arbitrary: fc.constant(null) },
        {
          weight: 2,
          arbitrary: fc.constantFrom(
            'tomorrow',
            '2020-01-01T00:00:00Z',
            '2030-02-30T00:00:00Z',
            '2030-13-01T00:00:00Z',
            '2030-01-01T24:00:00Z',
            '2030-01-01',
            '2030-01-01T00:00:00',
            '2030-01-01t00:00:00z',
            '2030-01-01 00:00:00+0100',
            '2030-01-01T00:00:00+24:00',
            '9999-12-31T23:59:59Z',
            '2030-01-01T00:00:00.123456789Z',
            '2030-01-01T00:00:00-23:59',
          ),
        },
      );
    const delegationRequest = () =>
      objectBody(
        fc
          .oneof(
            fc.tuple(
              onResource('scopes'),
              fc.record(
                {
                  grantee_type: fc.constant('subject'),
                  grantee_subject_id: fc.constantFrom('bob', 'alice', 'mallory', '__proto__', '\u{1F600}'),
                  expires_at: expiresAt(),
                },
                { requiredKeys: ['grantee_type', 'grantee_subject_id'] },
              ),
            ),
            fc.tuple(
              onResource('scopes'),
              fc.record(
                {
                  grantee_type: fc.constant('client'),
                  grantee_client_id: fc.constantFrom(
                    'requester',
                    'owner-rs',
                    'other-rs',
                    'acme-rs',
                    'no-such-client',
                    0,
                    12,
                  ),
                  expires_at: expiresAt(),
                },
                { requiredKeys: ['grantee_type', 'grantee_client_id'] },
              ),
            ),
          )
          .map(([target, grantee]) => ({ ...grantee, ...target })),
        Object.keys(DELEGATION_REQUEST.properties),
      );
    const delegationUpdate = () => {
      // The stored values repeated (allowed), or changed (a 400 naming the field).
      const repeated = fc.oneof(
        {
          weight: 3,
          arbitrary: fc
            .subarray([
              ['grantee_type', 'client'],
              ['grantee_client_id', 'requester'],
              ['resource_id', ownerResource],
              ['scopes', ['write', 'read']],
            ] as [string, unknown][])
            .map((entries) => Object.fromEntries(entries)),
        },
        {
          weight: 1,
          arbitrary: fc.record(
            {
              grantee_type: fc.constantFrom('client', 'subject'),
              grantee_client_id: fc.constantFrom('requester', 'other-rs', 'null'),
              grantee_subject_id: fc.constantFrom('bob', 'null'),
              resource_id: fc.constantFrom(ownerResource, typedResource),
              scopes: fc.constantFrom(['read', 'write'], ['read']),
            },
            { requiredKeys: [] },
          ),
        },
      );
      return objectBody(
        fc
          .tuple(fc.record({ expires_at: expiresAt() }), fc.option(repeated, { nil: {} }))
          .map(([expiry, others]) => ({ ...others, ...expiry })),
        Object.keys(DELEGATION_REQUEST.properties),
      );
    };

    const schemaFields = (schema: { properties: object }) => Object.keys(schema.properties);
    const families = [
      {
        name: 'POST /resource_registration/resource',
        method: 'POST',
        path: () => RESOURCES,
        token: () => ownerPat,
        body: resourceDescription,
        fields: schemaFields(RESOURCE_DESCRIPTION),
      },
      {
        name: 'PUT /resource_registration/resource/{id}',
        method: 'PUT',
        path: () => `${RESOURCES}/${putResource}`,
        token: () => ownerPat,
        body: resourceDescription,
        fields: schemaFields(RESOURCE_DESCRIPTION),
      },
      {
        name: 'POST /permission',
        method: 'POST',
        path: () => '/permission',
        token: () => ownerPat,
        body: permissionRequest,
        fields: ['resource_id', 'resource_scopes'],
      },
      {
        name: 'POST /delegation',
        method: 'POST',
        path: () => '/delegation',
        token: () => ownerDm,
        body: delegationRequest,
        fields: schemaFields(DELEGATION_REQUEST),
      },
      {
        name: 'PUT /delegation/{id}',
        method: 'PUT',
        path: () => `/delegation/${putDelegation}`,
        token: () => ownerDm,
        body: delegationUpdate,
        fields: schemaFields(DELEGATION_REQUEST),
      },
    ];

    for (const family of families) {
      it(`${family.name}: never a 5xx; refusals are JSON with a known code and name the field at fault`, async function () {
        await fc.assert(
          fc.asyncProperty(bodyText(family.body()), async (body) => {
            const req: Req = {
              method: family.method,
              path: family.path(),
              headers: [bearer(family.token()), JSON_TYPE],
              body,
            };
            const answer = await send(server, req);
            tally(family.name, answer.status, `${answer.json?.error} ${answer.json?.error_description}`);
            expectWellFormed(req, answer, API_CODES);
            expectFieldNamed(req, answer, family.fields);
          }),
          { numRuns: RUNS, seed: SEED },
        );
        // Nothing reached Object.prototype (the server runs in this process).
        expect(Object.prototype).not.to.have.property('polluted');
        expect(Object.prototype).not.to.have.property('isAdmin');
        // The owner's fixtures are still the owner's, unchanged where the property could not change them.
        const mine = await api(server, 'GET', `${RESOURCES}/${ownerResource}`, ownerPat);
        expect(mine.body).to.deep.equal({
          _id: ownerResource,
          name: 'Owner secret',
          resource_scopes: ['read', 'write'],
        });
        expect((await api(server, 'GET', `/delegation/${otherDelegation}`, otherDm)).body).to.include({
          status: 'active',
          grantee_subject_id: 'mallory',
        });
      });
    }

    it('stores no field a caller may not set (owner, _id, __proto__) and never answers with the owner', async function () {
      const created = await send(server, {
        method: 'POST',
        path: RESOURCES,
        headers: [bearer(ownerPat), JSON_TYPE],
        body: '{"__proto__":{"ownerClientId":"other-rs"},"name":"Proto","resource_scopes":["read"]}',
      });
      // An unknown field is refused rather than dropped: nothing is stored.
      expect(created.status, created.text).to.equal(400);
      expect(created.json).to.include({ error: 'invalid_request', field: '__proto__' });
      const listed = (await api(server, 'GET', RESOURCES, otherPat)).body as string[];
      expect(listed).to.deep.equal([otherResource]);
    });
  });

  // -------------------------------------------------------------------------------------------
  // 2. Path ids

  describe('hostile path ids', function () {
    const garbage = fc.oneof(
      { weight: 3, arbitrary: hostileText },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          '%2F',
          '%2f',
          'a%2Fb',
          '..%2F..',
          '..%2F..%2Fadmin%2Fapi%2Fclients',
          '%2e%2e',
          '.%2e',
          '%2e',
          '%252F',
          '%00',
          '%zz',
          '%',
          '%E0%A4%A',
          '%C0%AF',
          '%u002F',
          '..',
          '.',
          '...',
          '%20',
          '+',
          'null',
          'undefined',
          '__proto__',
          'constructor',
          'toString',
          '*',
          '%2A',
          '$where',
          '{"$ne":null}',
        ),
      },
      { weight: 1, arbitrary: fc.constantFrom(257, 513, 2000, 6000).map((length) => 'x'.repeat(length)) },
      { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }) },
    );
    /** Forms of a victim's id a server might wrongly match: encoded, cased, padded, truncated. */
    const variants = (id: string) =>
      fc.constantFrom(
        id,
        id.toUpperCase(),
        `${id}/`,
        `${id}%00`,
        `${id}%20`,
        `%20${id}`,
        `${id}%2F`,
        `${id}?x=1`,
        `${id}#x`,
        `${id}/..`,
        `../${id}`,
        `.%2F${id}`,
        id.slice(0, -1),
        `${id}x`,
        Array.from(id, (char) => `%${char.charCodeAt(0).toString(16).padStart(2, '0')}`).join(''),
      );

    const collections = () => [
      {
        name: 'resources',
        base: RESOURCES,
        mine: ownerPat,
        theirs: otherPat,
        victims: [otherResource],
        secrets: ['Other secret', otherResource],
        body: '{"name":"Mine now","resource_scopes":["read"]}',
      },
      {
        name: 'delegations',
        base: '/delegation',
        mine: ownerDm,
        theirs: otherDm,
        victims: [otherDelegation],
        secrets: ['mallory', otherDelegation, otherResource],
        body: JSON.stringify({ expires_at: future(60_000) }),
      },
    ];
    const methods = fc.constantFrom('GET', 'PUT', 'DELETE', 'GET', 'PUT', 'DELETE', 'PATCH', 'POST');

    it("with the owner's token: garbage ids are 404 (or 400/405), never a 5xx", async function () {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 1 }),
          pathSegment(garbage),
          methods,
          async (which, segment, method) => {
            const family = collections()[which]!;
            const req: Req = {
              method,
              path: `${family.base}/${segment}`,
              headers: [
                bearer(family.mine),
                ...(method === 'PUT' || method === 'POST' || method === 'PATCH' ? [JSON_TYPE] : []),
              ],
              ...(method === 'GET' || method === 'DELETE' ? {} : { body: family.body }),
            };
            const answer = await send(server, req);
            tally(`owner path ids (${family.name})`, answer.status, answer.json?.error);
            if (adminGateRefusal(req, answer)) return;
            expectWellFormed(req, answer, API_CODES);
            expect([400, 404, 405], `${describeReq(req)} → ${answer.status} ${answer.text.slice(0, 300)}`).to.include(
              answer.status,
            );
          },
        ),
        { numRuns: RUNS, seed: SEED },
      );
    });

    it("with another owner's token: a victim's id in any form, or garbage, is 404 (or 400/405) and shows nothing of it", async function () {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 1 }).chain((which) => {
            const family = collections()[which]!;
            // The attacker is the owner here, the victim is other-rs's record.
            return fc.tuple(
              fc.constant(which),
              fc.oneof(
                { weight: 3, arbitrary: fc.constantFrom(...family.victims).chain(variants) },
                { weight: 1, arbitrary: pathSegment(garbage) },
              ),
              methods,
            );
          }),
          async ([which, segment, method]) => {
            const family = collections()[which]!;
            const req: Req = {
              method,
              path: `${family.base}/${segment}`,
              headers: [bearer(family.mine), ...(method === 'GET' || method === 'DELETE' ? [] : [JSON_TYPE])],
              ...(method === 'GET' || method === 'DELETE' ? {} : { body: family.body }),
            };
            const answer = await send(server, req);
            tally(`foreign path ids (${family.name})`, answer.status, answer.json?.error);
            const where = `${describeReq(req)} → ${answer.status} ${answer.text.slice(0, 300)}`;
            for (const secret of family.secrets) expect(answer.text, where).not.to.contain(secret);
            if (adminGateRefusal(req, answer)) return;
            expectWellFormed(req, answer, API_CODES);
            expect([400, 404, 405], where).to.include(answer.status);
            for (const secret of family.secrets) expect(answer.text, where).not.to.contain(secret);
          },
        ),
        { numRuns: RUNS, seed: SEED },
      );
      // The victims are untouched.
      const resource = await api(server, 'GET', `${RESOURCES}/${otherResource}`, otherPat);
      expect(resource.body).to.deep.equal({
        _id: otherResource,
        name: 'Other secret',
        resource_scopes: ['read', 'write'],
      });
      const delegation = await api(server, 'GET', `/delegation/${otherDelegation}`, otherDm);
      expect(delegation.body).to.include({ status: 'active', revoked_at: null, grantee_subject_id: 'mallory' });
      expect((await api(server, 'GET', RESOURCES, ownerPat)).body).not.to.include(otherResource);
      expect(
        (await api(server, 'GET', '/delegation', ownerDm)).body.map((item: any) => item.delegation_id),
      ).not.to.include(otherDelegation);
    });
  });

  // -------------------------------------------------------------------------------------------
  // 3. Authorization headers

  describe('Authorization header garbage', function () {
    const endpoints = () => [
      { method: 'GET', path: RESOURCES },
      { method: 'POST', path: RESOURCES, body: '{"name":"x","resource_scopes":["read"]}' },
      { method: 'GET', path: `${RESOURCES}/${ownerResource}` },
      { method: 'PUT', path: `${RESOURCES}/${ownerResource}`, body: '{"name":"Stolen"}' },
      { method: 'DELETE', path: `${RESOURCES}/${ownerResource}` },
      {
        method: 'POST',
        path: '/permission',
        body: JSON.stringify({ resource_id: ownerResource, resource_scopes: ['read'] }),
      },
      { method: 'GET', path: '/delegation' },
      {
        method: 'POST',
        path: '/delegation',
        body: JSON.stringify({
          grantee_type: 'subject',
          grantee_subject_id: 'x',
          resource_id: ownerResource,
          scopes: ['read'],
        }),
      },
      { method: 'GET', path: `/delegation/${ownerDelegation}` },
      { method: 'PUT', path: `/delegation/${ownerDelegation}`, body: JSON.stringify({ expires_at: null }) },
      { method: 'DELETE', path: `/delegation/${ownerDelegation}` },
    ];

    const values = () => {
      const real = fc.constantFrom(ownerPat, ownerDm, otherPat);
      return fc.oneof(
        { weight: 2, arbitrary: hostileText.map(headerSafe) },
        { weight: 2, arbitrary: hostileText.map((text) => headerSafe(`Bearer ${text}`)) },
        { weight: 2, arbitrary: fc.stringMatching(/^[A-Za-z0-9\-._~+/]{1,80}=*$/).map((token) => `Bearer ${token}`) },
        {
          weight: 1,
          arbitrary: fc.constantFrom(513, 600, 4000, 12_000).map((length) => `Bearer ${'A'.repeat(length)}`),
        },
        { weight: 1, arbitrary: real.map((token) => `Bearer ${token}${'A'.repeat(520 - token.length)}`) },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            basic('owner-rs', ownerSecret),
            basic('requester', requesterSecret),
            `Basic ${Buffer.from(`owner-rs:${ownerSecret}`).toString('base64')}`,
          ),
        },
        {
          weight: 3,
          arbitrary: fc.oneof(
            real.map((token) => `Bearer ${token} ${token}`),
            real.map((token) => `Bearer ${token}, Bearer ${token}`),
            fc.tuple(real, real).map(([a, b]) => `Bearer ${a},${b}`),
            real.map((token) => `Bearer ${token}x`),
            real.map((token) => `Bearer ${token.slice(1)}`),
            real.map((token) => `Bearer ${token.toUpperCase()}`),
            real.map((token) => `Bearer "${token}"`),
            real.map((token) => `DPoP ${token}`),
            real.map((token) => `Token ${token}`),
            real.map((token) => `Bearer${token}`),
            real.map((token) => `Basic ${token}`),
            real.map((token) => token),
            real.map((token) => `Bearer ${token}\t${token}`),
            fc.constant(`Bearer ${acmePat}`),
            fc.constant(`Bearer ${ownerRpt}.`),
            fc.constantFrom(
              'Bearer',
              'Bearer ',
              'Bearer  ',
              'Bearer =',
              'Bearer ====',
              'Bearer null',
              'Bearer undefined',
              'Bearer a.b.c',
              'Bearer eyJhbGciOiJub25lIn0.e30.',
              '',
            ),
          ),
        },
      );
    };
    /** One Authorization header, or the header twice (Node keeps the first one only). */
    const headerSets = () =>
      fc.oneof(
        { weight: 5, arbitrary: values().map((value): [string, string][] => [['Authorization', value]]) },
        {
          weight: 1,
          arbitrary: fc.tuple(values(), values()).map(([a, b]): [string, string][] => [
            ['Authorization', a],
            ['Authorization', b],
          ]),
        },
      );

    it('answers 401 invalid_token with the Bearer challenge, on every endpoint', async function () {
      await fc.assert(
        fc.asyncProperty(fc.nat({ max: endpoints().length - 1 }), headerSets(), async (index, authorization) => {
          const endpoint = endpoints()[index]!;
          const req: Req = {
            method: endpoint.method,
            path: endpoint.path,
            headers: [...authorization, ...(endpoint.body ? [JSON_TYPE] : [])],
            body: endpoint.body,
          };
          const answer = await send(server, req);
          tally('Authorization garbage', answer.status, answer.json?.error);
          const where = `${describeReq(req)} → ${answer.status} ${answer.text.slice(0, 300)}`;
          // Two 12,000-character headers pass Node's header limit: its parser refuses them with a
          // 431 (RFC 6585) before any of the server's code runs, which answers nothing else there.
          if (authorization.reduce((bytes, [, value]) => bytes + value.length, 0) > maxHeaderSize) {
            expect(answer.status, where).to.equal(431);
            return;
          }
          expectWellFormed(req, answer, API_CODES);
          expect(answer.status, where).to.equal(401);
          expect(answer.json.error, where).to.equal('invalid_token');
          expect(String(answer.headers['www-authenticate'] ?? ''), where).to.match(/^Bearer error="invalid_token"/);
        }),
        { numRuns: RUNS, seed: SEED },
      );
      expect((await api(server, 'GET', `${RESOURCES}/${ownerResource}`, ownerPat)).body.name).to.equal('Owner secret');
      expect((await api(server, 'GET', `/delegation/${ownerDelegation}`, ownerDm)).body.status).to.equal('active');
    });
  });

  // -------------------------------------------------------------------------------------------
  // 4. Tenants

  describe('tenant crossing', function () {
    const ACME: [string, string] = ['X-Tenant-Id', 'acme'];

    it("refuses the default tenant's PAT and delegation token in tenant acme: 401 invalid_token", async function () {
      const reqs: Req[] = [
        { method: 'GET', path: RESOURCES, headers: [bearer(ownerPat), ACME] },
        { method: 'GET', path: `${RESOURCES}/${ownerResource}`, headers: [bearer(ownerPat), ACME] },
        { method: 'POST', path: RESOURCES, headers: [bearer(ownerPat), ACME, JSON_TYPE], body: '{"name":"x"}' },
        {
          method: 'POST',
          path: '/permission',
          headers: [bearer(ownerPat), ACME, JSON_TYPE],
          body: JSON.stringify({ resource_id: ownerResource, resource_scopes: ['read'] }),
        },
        { method: 'GET', path: '/delegation', headers: [bearer(ownerDm), ACME] },
        { method: 'GET', path: `/delegation/${ownerDelegation}`, headers: [bearer(ownerDm), ACME] },
        // And acme's tokens in the default tenant.
        { method: 'GET', path: RESOURCES, headers: [bearer(acmePat)] },
        { method: 'GET', path: '/delegation', headers: [bearer(acmeDm)] },
      ];
      for (const req of reqs) {
        const answer = await send(server, req);
        expect(answer.status, describeReq(req)).to.equal(401);
        expect(answer.json.error).to.equal('invalid_token');
        expect(String(answer.headers['www-authenticate'])).to.match(/^Bearer error="invalid_token"/);
      }
    });

    it("does not show the default tenant's resources, delegations or tickets to tenant acme's own tokens", async function () {
      const get = await send(server, {
        method: 'GET',
        path: `${RESOURCES}/${ownerResource}`,
        headers: [bearer(acmePat), ACME],
      });
      expect(get.status).to.equal(404);
      expect(get.json.error).to.equal('not_found');
      expect(get.text).not.to.contain('Owner secret');
      for (const method of ['PUT', 'DELETE']) {
        const answer = await send(server, {
          method,
          path: `${RESOURCES}/${ownerResource}`,
          headers: [bearer(acmePat), ACME, JSON_TYPE],
          body: method === 'PUT' ? '{"name":"Taken"}' : undefined,
        });
        expect(answer.status, method).to.equal(404);
      }
      const list = await send(server, { method: 'GET', path: RESOURCES, headers: [bearer(acmePat), ACME] });
      expect(list.status).to.equal(200);
      expect(list.json).to.be.an('array').that.does.not.include(ownerResource);
      const permission = await send(server, {
        method: 'POST',
        path: '/permission',
        headers: [bearer(acmePat), ACME, JSON_TYPE],
        body: JSON.stringify({ resource_id: ownerResource, resource_scopes: ['read'] }),
      });
      expect(permission.status).to.equal(400);
      expect(permission.json.error).to.equal('invalid_resource_id');

      const delegation = await send(server, {
        method: 'GET',
        path: `/delegation/${ownerDelegation}`,
        headers: [bearer(acmeDm), ACME],
      });
      expect(delegation.status).to.equal(404);
      const delegations = await send(server, { method: 'GET', path: '/delegation', headers: [bearer(acmeDm), ACME] });
      expect(delegations.json).to.deep.equal([]);
      const delegate = await send(server, {
        method: 'POST',
        path: '/delegation',
        headers: [bearer(acmeDm), ACME, JSON_TYPE],
        body: JSON.stringify({
          grantee_type: 'subject',
          grantee_subject_id: 'eve',
          resource_id: ownerResource,
          scopes: ['read'],
        }),
      });
      expect(delegate.status).to.equal(400);
      expect(delegate.json.error).to.equal('invalid_request');

      // A resource acme registers is acme's alone.
      const acmeResource = await send(server, {
        method: 'POST',
        path: RESOURCES,
        headers: [bearer(acmePat), ACME, JSON_TYPE],
        body: '{"name":"Acme thing","resource_scopes":["read"]}',
      });
      expect(acmeResource.status).to.equal(201);
      expect((await api(server, 'GET', `${RESOURCES}/${acmeResource.json._id}`, ownerPat)).status).to.equal(404);

      // A ticket of the default tenant is unknown in acme.
      const ticket = await ticketFor(ownerPat, { resource_id: ownerResource, resource_scopes: ['read'] });
      const crossing = await postForm(
        server,
        '/token',
        { grant_type: UMA_GRANT, ticket },
        { Authorization: basic('acme-rs', acmeSecret), 'X-Tenant-Id': 'acme' },
      );
      expect(crossing.status).to.equal(400);
      expect(crossing.body.error).to.equal('invalid_grant');
      // And the ticket is still good at home.
      expect((await redeem('owner-rs', { ticket })).status).to.equal(200);
    });

    it('refuses a tenant that does not exist before looking at the token', async function () {
      const answer = await send(server, {
        method: 'GET',
        path: RESOURCES,
        headers: [bearer(ownerPat), ['X-Tenant-Id', 'no-such-tenant']],
      });
      expect(answer.status).to.equal(400);
      expect(answer.json).to.include({ error: 'invalid_request', field: 'X-Tenant-Id' });
    });
  });

  // -------------------------------------------------------------------------------------------
  // 5. Body size, depth, media type

  describe('body limits', function () {
    const targets = () => [
      { method: 'POST', path: RESOURCES, token: ownerPat, wrap: (inner: string) => `{"name":${inner}}` },
      {
        method: 'PUT',
        path: `${RESOURCES}/${putResource}`,
        token: ownerPat,
        wrap: (inner: string) => `{"name":${inner}}`,
      },
      {
        method: 'POST',
        path: '/permission',
        token: ownerPat,
        wrap: (inner: string) => `{"resource_id":${inner},"resource_scopes":["read"]}`,
      },
      {
        method: 'POST',
        path: '/delegation',
        token: ownerDm,
        wrap: (inner: string) =>
          `{"grantee_type":"subject","grantee_subject_id":${inner},"resource_id":"${ownerResource}","scopes":["read"]}`,
      },
      {
        method: 'PUT',
        path: `/delegation/${putDelegation}`,
        token: ownerDm,
        wrap: (inner: string) => `{"expires_at":${inner}}`,
      },
    ];

    it(`answers 413 to a body over MAX_BODY_BYTES (${MAX_BODY_BYTES}), declared or chunked`, async function () {
      for (const target of targets()) {
        for (const chunked of [false, true]) {
          for (const inner of [
            JSON.stringify('a'.repeat(MAX_BODY_BYTES)),
            JSON.stringify('\u00fc'.repeat(MAX_BODY_BYTES / 2)),
          ]) {
            const req: Req = {
              method: target.method,
              path: target.path,
              headers: [bearer(target.token), JSON_TYPE],
              body: target.wrap(inner),
              chunked,
            };
            const answer = await send(server, req);
            expect(answer.status, describeReq(req)).to.equal(413);
            expect(answer.json.error).to.equal('invalid_request');
          }
        }
        // Exactly at the limit is read (and refused for what it says, not for its size).
        const padding = MAX_BODY_BYTES - target.wrap('""').length;
        const atLimit: Req = {
          method: target.method,
          path: target.path,
          headers: [bearer(target.token), JSON_TYPE],
          body: target.wrap(JSON.stringify('a'.repeat(padding))),
        };
        expect(Buffer.byteLength(atLimit.body!)).to.equal(MAX_BODY_BYTES);
        const answer = await send(server, atLimit);
        expect(answer.status, describeReq(atLimit)).to.equal(400);
      }
    });

    it(`answers 400 to nesting deeper than ${MAX_JSON_DEPTH}, and reads ${MAX_JSON_DEPTH} levels`, async function () {
      for (const target of targets()) {
        const deep: Req = {
          method: target.method,
          path: target.path,
          headers: [bearer(target.token), JSON_TYPE],
          body: target.wrap(nested(MAX_JSON_DEPTH, '1')),
        };
        const tooDeep = await send(server, deep);
        expect(tooDeep.status, describeReq(deep)).to.equal(400);
        expect(tooDeep.json).to.include({ error: 'invalid_request' });
        expect(tooDeep.json.error_description).to.match(/deeper than 32/);
        // Brackets inside strings do not count.
        const inString: Req = { ...deep, body: target.wrap(JSON.stringify('['.repeat(100))) };
        const answer = await send(server, inString);
        expect(answer.json.error_description ?? '', describeReq(inString)).not.to.match(/deeper/);
        // 32 levels in all: read, and refused by the schema naming the field.
        const atLimit: Req = { ...deep, body: target.wrap(nested(MAX_JSON_DEPTH - 1, '1')) };
        const read = await send(server, atLimit);
        expect(read.status, describeReq(atLimit)).to.equal(400);
        expect(read.json.error_description).not.to.match(/deeper/);
        expect(read.json.field, describeReq(atLimit)).to.be.a('string');
      }
    });

    it('answers 415 to a body that is not application/json', async function () {
      for (const target of targets()) {
        for (const type of [
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/jsonx',
          undefined,
        ]) {
          const req: Req = {
            method: target.method,
            path: target.path,
            headers: [bearer(target.token), ...(type ? [['Content-Type', type] as [string, string]] : [])],
            body: target.wrap('"x"'),
          };
          const answer = await send(server, req);
          expect(answer.status, describeReq(req)).to.equal(415);
          expect(answer.json.error).to.equal('invalid_request');
        }
      }
    });
  });

  // -------------------------------------------------------------------------------------------
  // 6. The UMA grant

  describe('the UMA grant at /token', function () {
    it('answers random ticket, claim_token, claim_token_format and rpt values with JSON invalid_request, invalid_grant, need_info or request_denied; never a 5xx', async function () {
      const redeemed = await ticketFor(ownerPat, { resource_id: ownerResource, resource_scopes: ['read'] });
      expect((await redeem('owner-rs', { ticket: redeemed })).status).to.equal(200);
      const optional = (valid: fc.Arbitrary<string>) =>
        fc.oneof(
          { weight: 5, arbitrary: fc.constant(undefined) },
          { weight: 2, arbitrary: valid },
          { weight: 2, arbitrary: hostileText },
          { weight: 1, arbitrary: fc.constantFrom(300, 513, 1200).map((length) => 'A'.repeat(length)) },
        );
      const request = fc.record({
        ticket: fc.oneof(
          { weight: 6, arbitrary: fc.constant('fresh') },
          { weight: 1, arbitrary: fc.constant(redeemed) },
          { weight: 2, arbitrary: hostileText },
          { weight: 1, arbitrary: fc.constantFrom(ownerPat, ownerRpt, 'A'.repeat(43), 'A'.repeat(300), '') },
        ),
        permissions: fc.nat({ max: 2 }),
        client: fc.constantFrom<'owner-rs' | 'requester'>('owner-rs', 'requester'),
        claim_token: optional(fc.constantFrom(ownerPat, ownerDm, otherPat, acmePat, ownerRpt)),
        claim_token_format: optional(
          fc.constantFrom(
            ACCESS_TOKEN_FORMAT,
            ID_TOKEN_FORMAT,
            `${ACCESS_TOKEN_FORMAT} `,
            ACCESS_TOKEN_FORMAT.toUpperCase(),
          ),
        ),
        rpt: optional(fc.constantFrom(ownerRpt, ownerPat, otherPat)),
        extra: fc.oneof(
          { weight: 4, arbitrary: fc.constant(undefined) },
          {
            weight: 1,
            arbitrary: fc.tuple(
              fc.constantFrom('pct', 'scope', 'resource', 'audience', 'requested_token_type'),
              hostileText,
            ),
          },
        ),
      });
      await fc.assert(
        fc.asyncProperty(request, async (generated) => {
          const fresh = generated.ticket === 'fresh';
          const ticket = fresh
            ? await ticketFor(
                ownerPat,
                [
                  // requester holds a delegation on ownerResource (putDelegation) and nothing on typedResource (need_info).
                  { resource_id: ownerResource, resource_scopes: ['write'] },
                  { resource_id: typedResource, resource_scopes: ['read'] },
                  [
                    { resource_id: ownerResource, resource_scopes: ['read'] },
                    { resource_id: typedResource, resource_scopes: ['read', 'share'] },
                  ],
                ][generated.permissions],
              )
            : generated.ticket;
          const form: Record<string, string> = { ticket };
          for (const name of ['claim_token', 'claim_token_format', 'rpt'] as const)
            if (generated[name] !== undefined) form[name] = generated[name]!;
          if (generated.extra) form[generated.extra[0]] = generated.extra[1];
          const answer = await redeem(generated.client, form);
          tally('UMA grant', answer.status, answer.body?.error);
          const where = `${generated.client} ${JSON.stringify(form).slice(0, 600)} → ${answer.status} ${JSON.stringify(answer.body)?.slice(0, 400)}`;
          if (Buffer.byteLength(new URLSearchParams({ grant_type: UMA_GRANT, ...form }).toString()) > MAX_BODY_BYTES) {
            // The form itself is over MAX_BODY_BYTES: refused before the grant reads it.
            expect(answer.status, where).to.equal(413);
            expect(answer.body.error, where).to.equal('invalid_request');
            return;
          }
          expect(answer.status, where).to.be.oneOf([200, 400, 403]);
          expect(answer.body, where).to.be.an('object');
          if (answer.status === 200) {
            expect(fresh, `a ticket that was never live was redeemed: ${where}`).to.equal(true);
            expect(answer.body.access_token, where).to.be.a('string');
            expect(answer.body.token_type, where).to.equal('Bearer');
          } else {
            // A malformed scope (UMA 2.0 Grant §3.3.1) or resource indicator is refused by the token endpoint before the grant.
            const codes = [
              ...GRANT_CODES,
              ...('scope' in form ? ['invalid_scope'] : []),
              ...('resource' in form ? ['invalid_target'] : []),
            ];
            expect(answer.body.error, where).to.be.oneOf(codes);
            expect(answer.body.error_description, where).to.be.a('string');
            if (answer.status === 403) expect(answer.body.error, where).to.be.oneOf(['need_info', 'request_denied']);
            if (answer.body.error === 'need_info') expect(answer.body.ticket, where).to.equal(ticket);
          }
          expect(JSON.stringify(answer.body), where).not.to.match(LEAK);
        }),
        { numRuns: RUNS, seed: SEED },
      );
    });
  });

  // -------------------------------------------------------------------------------------------
  // 7. Replay

  describe('ticket replay', function () {
    it('redeems a ticket exactly once among 5 concurrent redemptions by its owner, and never after', async function () {
      for (let round = 0; round < 4; round++) {
        const ticket = await ticketFor(
          ownerPat,
          round % 2
            ? [
                { resource_id: ownerResource, resource_scopes: ['read'] },
                { resource_id: typedResource, resource_scopes: ['share'] },
              ]
            : { resource_id: ownerResource, resource_scopes: ['read', 'write'] },
        );
        const answers = await Promise.all(Array.from({ length: 5 }, () => redeem('owner-rs', { ticket })));
        const statuses = answers.map((answer) => answer.status);
        expect(
          statuses.filter((status) => status === 200),
          JSON.stringify(answers.map((answer) => answer.body)),
        ).to.have.length(1);
        for (const answer of answers.filter((one) => one.status !== 200)) {
          expect(answer.status).to.equal(400);
          expect(answer.body.error).to.equal('invalid_grant');
        }
        const again = await redeem('owner-rs', { ticket });
        expect(again.status).to.equal(400);
        expect(again.body.error).to.equal('invalid_grant');
        // Nor by another client.
        expect((await redeem('requester', { ticket })).body.error).to.equal('invalid_grant');
      }
    });

    it('keeps a ticket usable after refusals (need_info), then redeems it once among concurrent owner and non-owner redemptions', async function () {
      // A resource of its own: nothing delegated on it (the body properties may delegate the others to requester).
      const resource = (
        await api(server, 'POST', RESOURCES, ownerPat, { name: 'Undelegated', resource_scopes: ['read'] })
      ).body._id;
      const ticket = await ticketFor(ownerPat, { resource_id: resource, resource_scopes: ['read'] });
      const refused = await redeem('requester', { ticket });
      expect(refused.status).to.equal(403);
      expect(refused.body.error).to.equal('need_info');
      const answers = await Promise.all([
        ...Array.from({ length: 3 }, () => redeem('owner-rs', { ticket })),
        ...Array.from({ length: 3 }, () => redeem('requester', { ticket })),
      ]);
      expect(answers.filter((answer) => answer.status === 200)).to.have.length(1);
      for (const answer of answers.filter((one) => one.status !== 200))
        expect(answer.body.error).to.be.oneOf(['invalid_grant', 'need_info']);
      expect((await redeem('owner-rs', { ticket })).body.error).to.equal('invalid_grant');
    });
  });
  // -------------------------------------------------------------------------------------------
  // Defects this suite found, fixed since.

  describe('defects found by this suite', function () {
    const bobOn = (resourceId: string, expiresAt: string | null) => ({
      grantee_type: 'subject',
      grantee_subject_id: 'bob',
      resource_id: resourceId,
      scopes: ['read'],
      expires_at: expiresAt,
    });

    // src/delegation/router.ts instant(): ajv-formats' date-time accepts a leap second
    // (23:59:60Z), new Date() does not, and toISOString() throws a RangeError: 500 server_error.
    it('refuses a leap-second expires_at with 400, not 500 (POST and PUT /delegation)', async function () {
      const created = await api(server, 'POST', '/delegation', ownerDm, bobOn(ownerResource, '2030-06-30T23:59:60Z'));
      expect(created.status, JSON.stringify(created.body)).to.equal(400);
      expect(created.body).to.include({ error: 'invalid_request', field: 'expires_at' });
      const updated = await api(server, 'PUT', `/delegation/${putDelegation}`, ownerDm, {
        expires_at: '2030-06-30T23:59:60Z',
      });
      expect(updated.status, JSON.stringify(updated.body)).to.equal(400);
    });

    // policies/arbiter/delegation/delegation.rego: time.parse_rfc3339_ns fails outside 1677-09-21..2262-04-11
    // (int64 nanoseconds), the "expires_at must be in the future" rule is then undefined, and the
    // decision falls through to allow: a delegation already expired is created (201), or set (200).
    it('refuses an expires_at in the distant past (year 0001, 1600) as it refuses 2020', async function () {
      for (const past of ['0001-01-01T00:00:00Z', '1600-01-01T00:00:00Z']) {
        const created = await api(server, 'POST', '/delegation', ownerDm, bobOn(ownerResource, past));
        expect(created.status, `${past}: ${JSON.stringify(created.body)}`).to.equal(400);
        expect(created.body.error).to.equal('invalid_request');
        const updated = await api(server, 'PUT', `/delegation/${putDelegation}`, ownerDm, { expires_at: past });
        expect(updated.status, `${past}: ${JSON.stringify(updated.body)}`).to.equal(400);
      }
    });

    // policies/arbiter/delegation/delegation.rego checks "the resource is not registered" before "revoke is
    // always allowed": once the owner deletes the resource, DELETE /delegation/{id} is 400
    // invalid_request and the delegation stays active (and keeps reaching the grantee's decisions).
    it('lets the owner revoke a delegation whose resource was deleted', async function () {
      const resource = (
        await api(server, 'POST', RESOURCES, ownerPat, { name: 'Short-lived', resource_scopes: ['read'] })
      ).body._id;
      const delegation = (await api(server, 'POST', '/delegation', ownerDm, bobOn(resource, future()))).body
        .delegation_id;
      expect((await api(server, 'DELETE', `${RESOURCES}/${resource}`, ownerPat)).status).to.equal(204);
      const revoked = await api(server, 'DELETE', `/delegation/${delegation}`, ownerDm);
      expect(revoked.status, JSON.stringify(revoked.body)).to.equal(204);
      expect((await api(server, 'GET', `/delegation/${delegation}`, ownerDm)).body.status).to.equal('revoked');
    });
  });
});
