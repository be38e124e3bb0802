import fc from 'fast-check';
import bcrypt from 'bcryptjs';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { Agent, request as httpRequest } from 'node:http';
import { randomUUID } from 'node:crypto';
import { API_KEY_INPUT_SCHEMA } from '../../src/admin/api-keys.js';
import { COLLECTIONS } from '../../src/catalog/index.js';
import { SORTABLE_FIELDS } from '../../src/audit/index.js';
import { FetchUserAgent } from '../support/browser.js';
import {
  arrivingAt,
  authorizationRequest,
  passDevIdpForms,
  redeemCode,
  registerIdentityProvider,
  registerPublicClient,
  startRegisteredDevIdp,
  type RegisteredDevIdp,
  type TestClient,
} from '../support/dev-idp.js';
import { basic, confidentialClient, postForm, updateOauthData } from '../support/oauth.js';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';
import {
  adminBody,
  authorizationDetailsValue,
  authorizationHeader,
  contentType,
  cookieHeader,
  deepJson,
  deepValue,
  dpopHeader,
  encodePairs,
  encoding,
  headerSafe,
  hostileJson,
  hostileName,
  hostileText,
  jsonText,
  malformedForm,
  malformedJson,
  mixed,
  numberText,
  parameters,
  pathSegment,
  queryPath,
  repeatSome,
  someOf,
  jwtOf,
  safeForUri,
  scopeValue,
  tenantHeader,
  urlValue,
  type Encoding,
  type Fixtures,
  type Pairs,
} from './arbitraries.js';

/**
 * Hostile input, generated: for every endpoint family, fast-check builds requests from known
 * parameter names with valid-looking and hostile values (real clients, codes and tokens mixed
 * with garbage), odd headers, repeated parameters, malformed and oversized bodies, and checks
 * one property of every answer: 2xx, 3xx (browser endpoints only) or 4xx, never 5xx; a 4xx
 * JSON body names its `error`; no body shows a stack trace or a file path.
 *
 * FUZZ_RUNS sets the runs per family (default 200); FUZZ_SEED replays a reported seed;
 * FUZZ_STATS=1 prints the statuses each family got (FUZZ_STATS=errors: per error description,
 * with an example request), FUZZ_TRACE=1 every request as it is sent.
 */
const RUNS = Math.max(1, Number(process.env.FUZZ_RUNS) || 200);
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
/** Oversized bodies cost a MiB each: a few per run of the suite, more in a long run. */
const OVERSIZED_RUNS = Math.max(4, Math.round(RUNS / 40));
const MIB = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Requests exactly as generated, and the property every answer must have

interface Req {
  method: string;
  /** Path and query, sent byte for byte. */
  path: string;
  headers: [string, string][];
  body?: string | Uint8Array | { fill: string; bytes: number; prefix: string };
  chunked?: boolean;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

const agent = new Agent({ keepAlive: true, maxSockets: 4 });

function materialize(body: Req['body']): Buffer | undefined {
  if (body === undefined) return undefined;
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  if (body instanceof Uint8Array) return Buffer.from(body);
  const prefix = Buffer.from(body.prefix);
  return Buffer.concat([prefix, Buffer.alloc(Math.max(0, body.bytes - prefix.length), body.fill)]);
}

function send(base: string, req: Req, timeoutMs = 20_000): Promise<Answer> {
  const { hostname, port, host } = new URL(base);
  const body = materialize(req.body);
  const headers: string[] = ['Host', host];
  for (const [name, value] of req.headers) headers.push(name, value);
  const declared = req.headers.some(([name]) => /^(content-length|transfer-encoding)$/i.test(name));
  if (body !== undefined && !declared)
    headers.push(...(req.chunked ? ['Transfer-Encoding', 'chunked'] : ['Content-Length', String(body.length)]));
  const big = body !== undefined && body.length > MIB;
  // Kept-alive connections throughout (as a client or a proxy would keep them), oversized bodies included.
  return new Promise((resolve, reject) => {
    let answered = false;
    const outgoing = httpRequest(
      { host: hostname, port, method: req.method, path: req.path, headers, agent, timeout: timeoutMs },
      (incoming) => {
        answered = true;
        const chunks: Buffer[] = [];
        incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
        incoming.on('end', () =>
          resolve({
            status: incoming.statusCode ?? 0,
            headers: incoming.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        incoming.on('error', reject);
      },
    );
    outgoing.on('timeout', () => outgoing.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    outgoing.on('error', (error: NodeJS.ErrnoException) => {
      if (answered) return;
      // The server may answer an oversized body and close before the client has written it all.
      if (big && (error.code === 'EPIPE' || error.code === 'ECONNRESET'))
        resolve({ status: -1, headers: {}, text: '' });
      else reject(error);
    });
    if (body !== undefined && req.chunked) {
      const step = 64 * 1024;
      for (let at = 0; at < body.length; at += step) outgoing.write(body.subarray(at, at + step));
      outgoing.end();
    } else {
      outgoing.end(body);
    }
  });
}

/** Internals a caller must never see: file paths, stack frames, error class names. */
const LEAKS: [string, RegExp][] = [
  ['a path under /work/', /\/work\/[^\s"'<>]*/g],
  ['node_modules', /node_modules[^\s"'<>]*/g],
  ['a stack frame', /\bat [^\n]{0,200}?\.(?:[cm]?[jt]s):\d+(?::\d+)?/g],
  ['an error class', /\b\w*Error:/g],
  ['a temporary path', /\/tmp\/[\w.-]+/g],
];

const BROWSER_PATHS = /^\/(authorize|interaction|idp|session)(\/|\?|$)/i;

interface Expectation {
  /** The request must be refused (4xx, or an error redirect from a browser endpoint): e.g. a parameter given twice. */
  refused?: boolean;
  /** The request must not be served (401/404/405…): e.g. an Admin path without the key. */
  notServed?: boolean;
  /** The next request on the same kept-alive connection must still be answered (the body was read or the connection closed). */
  connectionReusable?: boolean;
}

/** The property of every answer. Throws with the request and the answer for fast-check's report. */
function verify(req: Req, answer: Answer, expectation: Expectation = {}): void {
  const browser = BROWSER_PATHS.test(req.path);
  const problems: string[] = [];
  if (answer.status === -1) {
    problems.push('the connection was closed without an answer');
  } else if (answer.status >= 500 || answer.status < 200) {
    problems.push(`status ${answer.status}`);
  } else if (answer.status >= 300 && answer.status < 400 && !browser) {
    problems.push(`a redirect (${answer.status}) from a non-browser endpoint`);
  }
  if (answer.status >= 400 && answer.status < 500) {
    const json = isJson(answer);
    if (json === undefined) {
      if (!browser && answer.text !== '') problems.push(`a ${answer.status} whose body is not JSON`);
    } else if (typeof (json as { error?: unknown })?.error !== 'string') {
      problems.push(`a ${answer.status} JSON body without a string "error"`);
    }
  }
  // A browser endpoint may refuse by redirecting the error to the client (RFC 6749 §4.1.2.1).
  const redirectedError =
    browser && answer.status >= 300 && answer.status < 400 && /[?#&]error=/.test(String(answer.headers.location ?? ''));
  if (expectation.refused && !(answer.status >= 400 && answer.status < 500) && !redirectedError)
    problems.push(`expected a 4xx refusal, got ${answer.status}`);
  if (expectation.notServed && answer.status < 400) problems.push(`served without the Admin key: ${answer.status}`);
  const reflected = requestText(req);
  const shown = [
    answer.text,
    String(answer.headers.location ?? ''),
    String(answer.headers['www-authenticate'] ?? ''),
  ].join('\n');
  for (const [what, pattern] of LEAKS) {
    for (const match of shown.matchAll(pattern)) {
      if (!reflected.includes(match[0])) problems.push(`the answer shows ${what}: ${JSON.stringify(match[0])}`);
    }
  }
  if (problems.length) {
    throw new Error(
      `${problems.join('; ')}\n  request: ${req.method} ${req.path.slice(0, 600)}\n  answer: ${answer.status} ${answer.text.slice(0, 800)}`,
    );
  }
}

/**
 * How fast-check shows a counterexample: the request as JSON, with a long body cut (a deeply
 * nested or oversized body would fill the report); FUZZ_SEED and the printed path replay it.
 */
function printable(req: Req): Req {
  return Object.defineProperty(req, fc.toStringMethod, {
    value: () => {
      const body =
        typeof req.body === 'string' && req.body.length > 1500
          ? `${req.body.slice(0, 1500)}… (${req.body.length} characters)`
          : req.body instanceof Uint8Array
            ? `bytes ${Buffer.from(req.body).toString('hex')}`
            : req.body;
      return JSON.stringify({
        ...req,
        body,
        path: req.path.length > 1500 ? `${req.path.slice(0, 1500)}… (${req.path.length} characters)` : req.path,
      });
    },
    enumerable: false,
  });
}

/** A request in one line, for FUZZ_STATS. */
function oneLine(req: Req): string {
  const body =
    typeof req.body === 'string'
      ? req.body
      : req.body instanceof Uint8Array
        ? `<${req.body.length} bytes>`
        : req.body
          ? `<${req.body.bytes} bytes>`
          : '';
  return `${req.method} ${req.path.slice(0, 200)} ${JSON.stringify(req.headers.map(([name, value]) => `${name}: ${value.slice(0, 40)}`))} ${body.slice(0, 300)}`;
}

function isJson(answer: Answer): unknown {
  if (!/json/i.test(String(answer.headers['content-type'] ?? ''))) return undefined;
  try {
    return JSON.parse(answer.text);
  } catch {
    return undefined;
  }
}

/** Everything the request carried, raw and decoded, to tell reflection from a leak. */
function requestText(req: Req): string {
  const body =
    req.body === undefined || (typeof req.body === 'object' && !(req.body instanceof Uint8Array))
      ? ''
      : materialize(req.body)!.toString('utf8');
  const raw = [req.path, ...req.headers.map(([, value]) => value), body].join('\n');
  return `${raw}\n${decodeLoosely(raw)}\n${decodeLoosely(raw.replace(/\+/g, ' '))}`;
}

function decodeLoosely(text: string): string {
  return text.replace(/(%[0-9A-Fa-f]{2})+/g, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return run;
    }
  });
}

// ---------------------------------------------------------------------------------------------

const FORM = 'application/x-www-form-urlencoded';
const JSON_TYPE = 'application/json';

/** Header pairs, leaving out the absent ones. */
function headerList(entries: [string, string | undefined][]): [string, string][] {
  return entries.filter((entry): entry is [string, string] => entry[1] !== undefined);
}

describe('Hostile input (property-based, fast-check)', function () {
  this.timeout(120_000 + RUNS * 2_000);
  let server: TestServer;
  let idp: RegisteredDevIdp | undefined;
  let fx: Fixtures;
  let clientAssertions: string[];

  async function property(arbitrary: fc.Arbitrary<Req>, expectation: Expectation = {}, numRuns = RUNS): Promise<void> {
    const statuses = new Map<string, number>();
    const examples = new Map<string, Req>();
    try {
      await fc.assert(
        fc.asyncProperty(arbitrary.map(printable), async (req) => {
          if (process.env.FUZZ_TRACE) console.log(`      > ${oneLine(req)}`);
          const answer = await send(server.url, req);
          const key = `${answer.status}${process.env.FUZZ_STATS === 'errors' ? `:${(isJson(answer) as { error?: string; error_description?: string })?.error_description?.slice(0, 60) ?? ''}` : ''}`;
          statuses.set(key, (statuses.get(key) ?? 0) + 1);
          if (process.env.FUZZ_STATS === 'errors' && statuses.get(key) === 1) examples.set(key, req);
          verify(req, answer, expectation);
          if (expectation.connectionReusable) {
            const next = await send(server.url, { method: 'GET', path: '/healthz', headers: [] }).catch(
              (error: Error) => error,
            );
            if (next instanceof Error || next.status !== 200)
              throw new Error(
                `the next request on the connection failed: ${next instanceof Error ? next.message : next.status}\n  after: ${oneLine(req)}`,
              );
          }
        }),
        { numRuns, ...(SEED === undefined ? {} : { seed: SEED }) },
      );
    } finally {
      // FUZZ_STATS=1 shows how deep the generated requests went (how many were served, refused…).
      if (process.env.FUZZ_STATS)
        console.log(
          `      statuses: ${[...statuses]
            .sort(([a], [b]) => a.localeCompare(b))
            .map(
              ([status, count]) =>
                `${status}×${count}${examples.has(status) ? `  e.g. ${oneLine(examples.get(status)!)}` : ''}`,
            )
            .join(process.env.FUZZ_STATS === 'errors' ? '\n        ' : ' ')}`,
        );
    }
  }

  before(async function () {
    this.timeout(180_000);
    // Its own server: the fuzzing writes policy rules and data, and floods the store.
    server = await readyServer({ TENANTS: 'fuzz-t' });
    fx = await setUpFixtures();
  });

  after(async function () {
    agent.destroy();
    await idp?.close();
    await server?.close();
  });

  /** Clients, records, codes and tokens for the generators to mix in. */
  async function setUpFixtures(): Promise<Fixtures> {
    const issuer = server.config.issuer;
    await updateOauthData(server, (data) => {
      data.public_client_policy.enabled = true;
      data.resource_types['urn:fuzz:docs'] = {
        scopes: ['read', 'write'],
        obligations: { log_access: true },
        extensions: { tier: 'gold' },
      };
      data.resource_types['urn:fuzz:tickets'] = { scopes: ['read'], jit_single_use: true };
      data.resource_types['urn:fuzz:bound'] = { scopes: ['read'], obligations: { dpop_required: true } };
      data.rar_only_types = { 'urn:fuzz:payment': {} };
      data.trusted_issuers = { 'https://issuer.fuzz.test': { uses: ['software_statement'] } };
      data.software_statements = { denylist: ['denied-software'] };
    });
    idp = await startRegisteredDevIdp(server);
    const redirect = 'http://127.0.0.1:1/fuzz/cb';
    const webRedirect = 'https://app.fuzz.test/cb';
    const scopes = ['openid', 'profile', 'email', 'read', 'write', 'introspection', 'uma_protection'];
    const confidential: Fixtures['confidential'] = [];
    for (const [clientId, fields, tenant] of [
      ['fuzz-app', { scopes, redirectUris: [webRedirect] }, undefined],
      ['fuzz-rs', { scopes: ['introspection'] }, undefined],
      ['fuzz-app', { scopes, redirectUris: [webRedirect] }, 'fuzz-t'],
    ] as const) {
      confidential.push({
        clientId,
        secret: await confidentialClient(server, clientId, fields, tenant),
        ...(tenant ? { tenant } : {}),
      });
    }
    const postClient = {
      clientId: 'fuzz-post',
      secret: await confidentialClient(server, 'fuzz-post', {
        scopes: ['read'],
        tokenEndpointAuthMethod: 'client_secret_post',
      }),
    };
    const spa: TestClient = await registerPublicClient(server, redirect, { clientId: 'fuzz-spa' });
    await registerPublicClient(server, redirect, { clientId: 'fuzz-spa', tenantId: 'fuzz-t' });

    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'fuzz-k1', alg: 'ES256', use: 'sig' };
    await server.admin('POST', '/clients', {
      clientId: 'fuzz-jwt',
      clientType: 'confidential',
      tokenEndpointAuthMethod: 'private_key_jwt',
      jwks: { keys: [jwk] },
      scopes: ['read'],
    });
    clientAssertions = await Promise.all(
      Array.from({ length: 8 }, () =>
        new SignJWT({})
          .setProtectedHeader({ alg: 'ES256', kid: 'fuzz-k1' })
          .setIssuer('fuzz-jwt')
          .setSubject('fuzz-jwt')
          .setAudience(issuer)
          .setJti(randomUUID())
          .setIssuedAt()
          .setExpirationTime('10m')
          .sign(privateKey),
      ),
    );
    const dpopKey = await generateKeyPair('ES256');
    const dpopJwk = await exportJWK(dpopKey.publicKey);
    const dpopProofs = await Promise.all(
      Array.from({ length: 12 }, (_, n) =>
        new SignJWT({ htm: n % 3 === 2 ? 'GET' : 'POST', htu: `${issuer}/${n % 3 === 2 ? 'userinfo' : 'token'}` })
          .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: dpopJwk })
          .setJti(randomUUID())
          .setIssuedAt()
          .sign(dpopKey.privateKey),
      ),
    );

    // Admin records: references for generated bodies, and victims that PUT may overwrite.
    const rsClient = (await server.admin('GET', '/clients/fuzz-rs')).body;
    const created = async (path: string, body: Record<string, unknown>) => {
      const answer = await server.admin('POST', path, body);
      if (answer.status !== 201)
        throw new Error(`fixture ${path} not created: ${answer.status} ${JSON.stringify(answer.body)}`);
      return answer.body as Record<string, any>;
    };
    const apiServer = await created('/resource-servers', {
      resourceIndicator: 'https://api.fuzz.test/',
      clientId: rsClient.id,
      typeUris: ['urn:fuzz:docs'],
    });
    await created('/resource-servers', { resourceIndicator: 'https://bound.fuzz.test/', typeUris: ['urn:fuzz:bound'] });
    const victimServer = await created('/resource-servers', {
      resourceIndicator: 'https://victim.fuzz.test/',
      typeUris: ['urn:fuzz:tickets'],
    });
    const docType = await created('/resource-types', { typeUri: 'urn:fuzz:docs', scopes: ['read', 'write'] });
    const victimType = await created('/resource-types', {
      typeUri: 'urn:fuzz:victim-type',
      parentTypeId: docType.id,
      scopes: ['read'],
    });
    const victimSubject = await created('/subjects', { subjectId: 'fuzz-victim-subject', name: 'Victim' });
    const victimResource = await created('/resources', {
      resourceServerId: apiServer.id,
      resourceTypeId: docType.id,
      resourceIdentifier: 'https://api.fuzz.test/doc/1',
      ownerSubjectId: victimSubject.id,
      scopes: ['read'],
    });
    await created('/clients', {
      clientId: 'fuzz-victim-client',
      clientType: 'confidential',
      clientSecret: bcrypt.hashSync('victim-secret', 4),
      scopes: ['read'],
    });
    const victimRule = await created('/policy-rules', {
      version: 'fuzz-v',
      kind: 'rego',
      path: 'fuzz/victim.rego',
      content: 'package arbiter.fuzz_victim\n\nimport rego.v1\n\nok := true\n',
    });
    const victimData = await created('/policy-data', { dataKey: 'fuzz_victim', payload: '{"a":1}', version: 'fuzz-v' });
    const victimIdp = await registerIdentityProvider(server, 'http://127.0.0.1:1', { idpId: 'fuzz-victim-idp' });
    const victimInitialAccessToken = await created('/initial-access-tokens', { name: 'fuzz victim', uses: 5 });

    // Sign-ins through the dev IdP: live codes, and tokens from redeemed ones.
    const codes: string[] = [];
    const codeVerifiers: string[] = [];
    const accessTokens: string[] = [];
    const refreshTokens: string[] = [];
    const idTokens: string[] = [];
    for (let n = 0; n < 6; n++) {
      const request = await authorizationRequest(server, spa, { nonce: `n-${n}` });
      const agentForSignIn = new FetchUserAgent();
      const loginPage = await agentForSignIn.navigate(request.url, arrivingAt(redirect));
      const arrived = loginPage.url.href.startsWith(redirect)
        ? loginPage
        : await passDevIdpForms(agentForSignIn, loginPage, n % 2 ? 'alice' : 'bob', arrivingAt(redirect));
      const code = arrived.url.searchParams.get('code');
      if (!code)
        throw new Error(
          `no code from the sign-in: ${arrived.url.href} ${arrived.status ?? ''} ${arrived.body?.slice(0, 300) ?? ''}`,
        );
      if (n < 3) {
        codes.push(code);
        codeVerifiers.push(request.codeVerifier);
        continue;
      }
      const { status, body } = await redeemCode(server, spa, code, request.codeVerifier);
      if (status !== 200) throw new Error(`code not redeemed: ${JSON.stringify(body)}`);
      accessTokens.push(body.access_token);
      refreshTokens.push(body.refresh_token);
      idTokens.push(body.id_token);
      codes.push(code); // used: a second use is its own path through the server
      codeVerifiers.push(request.codeVerifier);
    }
    const rotated = await postForm(server, '/token', {
      grant_type: 'refresh_token',
      refresh_token: refreshTokens[0]!,
      client_id: spa.clientId,
    });
    if (rotated.status !== 200) throw new Error(`refresh failed: ${JSON.stringify(rotated.body)}`);
    refreshTokens.push(rotated.body.refresh_token);
    accessTokens.push(rotated.body.access_token);

    const cc = async (clientId: string, secret: string, form: Record<string, string>, tenant?: string) => {
      const answer = await postForm(
        server,
        '/token',
        { grant_type: 'client_credentials', ...form },
        { Authorization: basic(clientId, secret), ...(tenant ? { 'X-Tenant-Id': tenant } : {}) },
      );
      if (answer.status !== 200)
        throw new Error(`client_credentials for ${clientId} failed: ${JSON.stringify(answer.body)}`);
      return answer.body.access_token as string;
    };
    const [app, rs, appInTenant] = confidential;
    accessTokens.push(
      await cc(app!.clientId, app!.secret, { scope: 'read' }),
      await cc(app!.clientId, app!.secret, { scope: 'read', resource: 'https://api.fuzz.test/' }),
      await cc(appInTenant!.clientId, appInTenant!.secret, { scope: 'read' }, 'fuzz-t'),
    );
    const callerTokens = [await cc(rs!.clientId, rs!.secret, { scope: 'introspection' })];

    return {
      issuer,
      knownTenants: ['fuzz-t'],
      confidential,
      postClient,
      publicClients: [spa.clientId],
      jwtClient: 'fuzz-jwt',
      redirectUris: [redirect, webRedirect],
      scopes,
      resources: [
        'https://api.fuzz.test/',
        'https://bound.fuzz.test/',
        'https://victim.fuzz.test/',
        'https://api.fuzz.test/doc/1',
        'https://unknown.fuzz.test/',
        'urn:fuzz:resource',
      ],
      typeUris: ['urn:fuzz:docs', 'urn:fuzz:tickets', 'urn:fuzz:bound', 'urn:as:introspect'],
      rarTypes: ['urn:fuzz:payment'],
      codes,
      codeVerifiers,
      accessTokens,
      refreshTokens,
      idTokens,
      callerTokens,
      dpopProofs,
      idpIds: [idp.idpId, victimIdp.idpId],
      recordIds: [
        ...new Set([
          rsClient.id,
          apiServer.id,
          victimServer.id,
          docType.id,
          victimType.id,
          victimSubject.id,
          victimResource.id,
          victimRule.id,
          victimData.id,
          victimIdp.id,
          idp.id,
        ]),
      ],
      victims: {
        'identity-providers': [victimIdp.idpId],
        'resource-servers': [String(victimServer.id)],
        'resource-types': [String(victimType.id)],
        resources: [String(victimResource.id)],
        clients: ['fuzz-victim-client'],
        subjects: [String(victimSubject.id)],
        'policy-rules': [String(victimRule.id)],
        'policy-data': [String(victimData.id)],
        'initial-access-tokens': [String(victimInitialAccessToken.id)],
      },
      auditSortFields: SORTABLE_FIELDS,
    };
  }

  // -------------------------------------------------------------------------------------------
  // Building blocks

  /** A form (or, now and then, another kind of body) POSTed to a protocol endpoint. */
  function formRequest(
    path: string,
    pairs: fc.Arbitrary<Pairs>,
    headers: fc.Arbitrary<[string, string | undefined][]>,
    how: fc.Arbitrary<Encoding> = encoding,
  ): fc.Arbitrary<Req> {
    return fc
      .record({
        pairs,
        how,
        mangle: fc.nat(),
        type: fc.oneof({ weight: 12, arbitrary: fc.constant(FORM) }, { weight: 1, arbitrary: contentType }),
        headers,
        tenant: tenantHeader(fx),
        chunked: fc.boolean(),
      })
      .map(({ pairs: form, how, mangle, type, headers: extra, tenant, chunked }) => ({
        method: 'POST',
        path,
        headers: headerList([['Content-Type', type], ['X-Tenant-Id', tenant], ...extra]),
        body: encodePairs(form, how, mangle),
        ...(chunked ? { chunked } : {}),
      }));
  }

  /** A GET with a generated query string. */
  function queryRequest(
    path: fc.Arbitrary<string>,
    pairs: fc.Arbitrary<Pairs>,
    headers: fc.Arbitrary<[string, string | undefined][]>,
    how: fc.Arbitrary<Encoding> = encoding,
  ): fc.Arbitrary<Req> {
    return fc
      .record({ path, pairs, how, mangle: fc.nat(), headers, tenant: tenantHeader(fx) })
      .map(({ path: at, pairs: query, how: howEncoded, mangle, headers: extra, tenant }) => ({
        method: 'GET',
        path: queryPath(at, encodePairs(query, howEncoded, mangle)),
        headers: headerList([['X-Tenant-Id', tenant], ...extra]),
      }));
  }

  const adminKey = () =>
    fc.oneof(
      { weight: 20, arbitrary: fc.constant(ADMIN_KEY) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(`${ADMIN_KEY} `, ADMIN_KEY.toUpperCase(), `${ADMIN_KEY},${ADMIN_KEY}`, ''),
      },
    );

  /** Client authentication for /token and /introspect: a header, form credentials or an assertion. */
  function clientAuth(): fc.Arbitrary<{ header: string | undefined; form: Pairs }> {
    const post = fc.oneof(
      fc.constant(fx.postClient).map(({ clientId, secret }): Pairs => [
        ['client_id', clientId],
        ['client_secret', secret],
      ]),
      fc.constantFrom(...fx.confidential).map(({ clientId, secret }): Pairs => [
        ['client_id', clientId],
        ['client_secret', secret],
      ]),
      fc
        .tuple(mixed(fc.constantFrom(fx.postClient.clientId, ...fx.publicClients)), hostileText)
        .map(([clientId, secret]): Pairs => [
          ['client_id', clientId],
          ['client_secret', secret],
        ]),
      fc.constantFrom(...fx.publicClients).map((clientId): Pairs => [['client_id', clientId]]),
    );
    const assertion = fc
      .tuple(
        fc.constantFrom(...clientAssertions, 'a.b.c', ''),
        fc.constantFrom(
          'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
          'urn:ietf:params:oauth:client-assertion-type:saml2-bearer',
          '',
        ),
      )
      .map(([value, type]): Pairs => [
        ['client_id', fx.jwtClient],
        ['client_assertion_type', type],
        ['client_assertion', value],
      ]);
    return fc.oneof(
      { weight: 4, arbitrary: authorizationHeader(fx).map((header) => ({ header, form: [] as Pairs })) },
      { weight: 2, arbitrary: post.map((form) => ({ header: undefined, form })) },
      { weight: 1, arbitrary: assertion.map((form) => ({ header: undefined, form })) },
    );
  }

  /** POST /token with a grant's parameters, client authentication and odd headers now and then. */
  function tokenRequest(
    spec: Record<string, fc.Arbitrary<string>>,
    required: string[],
    auth: fc.Arbitrary<{ header: string | undefined; form: Pairs }> = clientAuth(),
  ): fc.Arbitrary<Req> {
    const common: Record<string, fc.Arbitrary<string>> = {
      scope: scopeValue(fx),
      resource: urlValue(fx),
      resource_types: mixed(
        fc.array(fc.constantFrom(...fx.typeUris), { minLength: 1, maxLength: 3 }).map((types) => types.join(',')),
      ),
      resource_type: mixed(fc.constantFrom(...fx.typeUris)),
      authorization_details: authorizationDetailsValue(fx),
    };
    return fc
      .record({
        pairs: parameters({ ...common, ...spec }, required),
        auth,
        dpop: dpopHeader(fx),
        how: encoding,
        mangle: fc.nat(),
        type: fc.oneof({ weight: 12, arbitrary: fc.constant(FORM) }, { weight: 1, arbitrary: contentType }),
        tenant: tenantHeader(fx),
        chunked: fc.boolean(),
      })
      .map(({ pairs, auth, dpop, how, mangle, type, tenant, chunked }) => {
        const form = [...pairs.filter(([name]) => !auth.form.some(([taken]) => taken === name)), ...auth.form];
        return {
          method: 'POST',
          path: '/token',
          headers: headerList([
            ['Content-Type', type],
            ['Authorization', auth.header],
            ['DPoP', dpop],
            ['X-Tenant-Id', tenant],
          ]),
          body: encodePairs(form, how, mangle),
          ...(chunked ? { chunked } : {}),
        };
      });
  }

  /** A public client names itself in the form (the grant's client_id); otherwise any client authentication. */
  function publicOrAny(): fc.Arbitrary<{ header: string | undefined; form: Pairs }> {
    return fc.oneof(
      { weight: 3, arbitrary: fc.constant({ header: undefined, form: [] as Pairs }) },
      { weight: 2, arbitrary: clientAuth() },
    );
  }

  // -------------------------------------------------------------------------------------------
  // /token

  describe('POST /token', function () {
    it('client_credentials', async function () {
      await property(tokenRequest({ grant_type: fc.constant('client_credentials') }, ['grant_type']));
    });

    it('authorization_code', async function () {
      await property(
        tokenRequest(
          {
            grant_type: fc.constant('authorization_code'),
            code: mixed(fc.constantFrom(...fx.codes), 4),
            redirect_uri: urlValue(fx),
            code_verifier: fc.oneof(
              fc.constantFrom(...fx.codeVerifiers),
              fc.stringMatching(/^[A-Za-z0-9\-._~]{43,128}$/),
              hostileText,
            ),
            client_id: mixed(
              fc.oneof(
                { weight: 4, arbitrary: fc.constantFrom(...fx.publicClients) },
                { weight: 1, arbitrary: fc.constantFrom(...fx.confidential.map(({ clientId }) => clientId)) },
              ),
            ),
          },
          ['grant_type', 'code', 'redirect_uri', 'code_verifier', 'client_id'],
          publicOrAny(),
        ),
      );
    });

    it('refresh_token', async function () {
      await property(
        tokenRequest(
          {
            grant_type: fc.constant('refresh_token'),
            refresh_token: mixed(fc.constantFrom(...fx.refreshTokens, ...fx.accessTokens), 4),
            client_id: mixed(
              fc.oneof(
                { weight: 4, arbitrary: fc.constantFrom(...fx.publicClients) },
                { weight: 1, arbitrary: fc.constantFrom(...fx.confidential.map(({ clientId }) => clientId)) },
              ),
            ),
          },
          ['grant_type', 'refresh_token', 'client_id'],
          publicOrAny(),
        ),
      );
    });

    it('unknown and odd grant types', async function () {
      const grant = fc.oneof(
        fc.constantFrom(
          'password',
          'implicit',
          'urn:ietf:params:oauth:grant-type:token-exchange',
          'urn:ietf:params:oauth:grant-type:device_code',
          'urn:ietf:params:oauth:grant-type:jwt-bearer',
          'urn:ietf:params:oauth:grant-type:saml2-bearer',
          'urn:ietf:params:oauth:grant-type:uma-ticket',
          'urn:openid:params:grant-type:ciba',
          'client_credentials ',
          ' client_credentials',
          'CLIENT_CREDENTIALS',
          'authorization_code\u0000',
          'refresh_token,client_credentials',
          'client_credentials client_credentials',
          '__proto__',
          'constructor',
          'toString',
        ),
        hostileText,
      );
      const token = mixed(fc.constantFrom(...fx.accessTokens, ...fx.idTokens, ...fx.refreshTokens));
      await property(
        tokenRequest(
          {
            grant_type: grant,
            subject_token: token,
            subject_token_type: mixed(
              fc.constantFrom(
                'urn:ietf:params:oauth:token-type:access_token',
                'urn:ietf:params:oauth:token-type:id_token',
                'urn:ietf:params:oauth:token-type:refresh_token',
                'urn:ietf:params:oauth:token-type:jwt',
              ),
            ),
            requested_token_type: hostileText,
            actor_token: token,
            audience: urlValue(fx),
            username: hostileText,
            password: hostileText,
            device_code: hostileText,
            assertion: token,
            ticket: hostileText,
            code: mixed(fc.constantFrom(...fx.codes)),
            refresh_token: mixed(fc.constantFrom(...fx.refreshTokens)),
          },
          ['grant_type'],
        ),
      );
    });
  });

  // -------------------------------------------------------------------------------------------
  // /introspect, /authorize, /register, /userinfo

  it('POST /introspect', async function () {
    const caller = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...fx.callerTokens).map((token) => `Bearer ${token}`) },
      { weight: 2, arbitrary: fc.constant(basic(fx.confidential[1]!.clientId, fx.confidential[1]!.secret)) },
      { weight: 3, arbitrary: authorizationHeader(fx) },
    );
    const context = fc.oneof(
      fc
        .record(
          {
            resource: urlValue(fx),
            resource_types: fc.array(fc.constantFrom(...fx.typeUris)),
            scopes: fc.array(fc.constantFrom(...fx.scopes)),
          },
          { requiredKeys: [] },
        )
        .map((value) => JSON.stringify(value)),
      fc.dictionary(hostileName, hostileJson, { maxKeys: 3 }).map((value) => JSON.stringify(value)),
      deepJson.map((nested) => nested.text),
      fc.tuple(urlValue(fx), deepValue).map(([resource, deep]) => JSON.stringify({ resource, deep })),
      malformedJson,
      hostileText,
    );
    const pairs = parameters({
      token: mixed(
        fc.constantFrom(...fx.accessTokens, ...fx.refreshTokens, ...fx.idTokens, ...fx.callerTokens, ...fx.codes),
        4,
      ),
      token_type_hint: mixed(
        fc.constantFrom('access_token', 'refresh_token', 'authorization_code', 'id_token', 'client_credentials'),
      ),
      context,
      client_id: mixed(fc.constantFrom(...fx.confidential.map(({ clientId }) => clientId))),
      client_secret: mixed(fc.constantFrom(...fx.confidential.map(({ secret }) => secret))),
    });
    await property(
      formRequest(
        '/introspect',
        pairs,
        fc.tuple(caller, dpopHeader(fx)).map(([auth, dpop]): [string, string | undefined][] => [
          ['Authorization', auth],
          ['DPoP', dpop],
        ]),
      ),
    );
  });

  /** The parameters of an authorization request, valid-looking or hostile. */
  function authorizeParameters(): fc.Arbitrary<Pairs> {
    const clientId = fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom(...fx.publicClients, fx.confidential[0]!.clientId) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          'https://127.0.0.1:1/cimd.json',
          'http://localhost:1/cimd',
          'https://127.0.0.1:1/',
          'https://127.0.0.1:1/a/../b',
          'https://127.0.0.1:1/cimd#x',
          'http://127.0.0.1:1/x',
        ),
      },
      { weight: 2, arbitrary: hostileText },
    );
    return parameters(
      {
        response_type: fc.oneof(
          { weight: 6, arbitrary: fc.constant('code') },
          {
            weight: 2,
            arbitrary: fc.constantFrom('token', 'code id_token', 'id_token', 'none', 'code token', 'CODE', ''),
          },
          { weight: 1, arbitrary: hostileText },
        ),
        client_id: clientId,
        redirect_uri: urlValue(fx),
        scope: scopeValue(fx),
        state: mixed(fc.string({ maxLength: 20 })),
        nonce: mixed(fc.string({ maxLength: 20 })),
        code_challenge: fc.oneof(
          fc.constant('E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'),
          fc.stringMatching(/^[A-Za-z0-9\-._~]{43,128}$/),
          hostileText,
        ),
        code_challenge_method: mixed(fc.constantFrom('S256', 'plain', 's256', 'S512')),
        resource: urlValue(fx),
        resource_types: mixed(
          fc.array(fc.constantFrom(...fx.typeUris), { minLength: 1, maxLength: 3 }).map((types) => types.join(',')),
        ),
        resource_type: mixed(fc.constantFrom(...fx.typeUris)),
        authorization_details: authorizationDetailsValue(fx),
        prompt: mixed(
          fc.constantFrom('none', 'login', 'consent', 'select_account', 'none login', 'login consent', 'create'),
        ),
        max_age: mixed(numberText),
        acr_values: hostileText,
        login_hint: hostileText,
        upstream_idp: mixed(fc.constantFrom(...fx.idpIds)),
        response_mode: mixed(fc.constantFrom('query', 'fragment', 'form_post', 'jwt', 'query.jwt', 'web_message')),
        id_token_hint: mixed(fc.constantFrom(...fx.idTokens)),
        claims: mixed(
          fc.constantFrom(
            '{"userinfo":{"email":null}}',
            '{"id_token":{"acr":{"essential":true,"values":["x"]}}}',
            '{"userinfo":1}',
          ),
        ),
        request: fc.constantFrom('eyJhbGciOiJub25lIn0.eyJzY29wZSI6Im9wZW5pZCJ9.', 'a.b.c', ...fx.idTokens),
        request_uri: urlValue(fx),
        ui_locales: hostileText,
        display: mixed(fc.constantFrom('page', 'popup')),
        registration: hostileText,
        dpop_jkt: hostileText,
      },
      ['response_type', 'client_id', 'redirect_uri'],
      4,
    ).chain((pairs) =>
      // Mostly a client with its own redirect URI (and, for the public client, a challenge), so that the request reaches sign-in.
      fc.oneof(
        { weight: 2, arbitrary: fc.constant(pairs) },
        {
          weight: 3,
          arbitrary: fc
            .constantFrom<Pairs>(
              [
                ['client_id', fx.publicClients[0]],
                ['redirect_uri', fx.redirectUris[0]],
                ['code_challenge', 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'],
                ['code_challenge_method', 'S256'],
              ],
              [
                ['client_id', fx.confidential[0]!.clientId],
                ['redirect_uri', fx.redirectUris[1]],
              ],
            )
            .map((coherent) => [...pairs.filter(([name]) => !coherent.some(([taken]) => taken === name)), ...coherent]),
        },
      ),
    );
  }

  it('GET /authorize query strings (and POST forms)', async function () {
    const browserHeaders = fc
      .tuple(cookieHeader(), dpopHeader(fx))
      .map(([cookie, dpop]): [string, string | undefined][] => [
        ['Cookie', cookie],
        ['DPoP', dpop],
      ]);
    await property(
      fc.oneof(
        { weight: 5, arbitrary: queryRequest(fc.constant('/authorize'), authorizeParameters(), browserHeaders) },
        { weight: 1, arbitrary: formRequest('/authorize', authorizeParameters(), browserHeaders) },
        {
          weight: 1,
          arbitrary: queryRequest(
            fc.oneof(
              pathSegment(hostileText).map((uid) => `/interaction/${uid}`),
              fc.constant('/idp/callback'),
              pathSegment(hostileText).map((uid) => `/interaction/${uid}/login`),
            ),
            parameters({
              state: hostileText,
              code: hostileText,
              error: mixed(fc.constantFrom('access_denied', 'login_required')),
              error_description: hostileText,
              iss: urlValue(fx),
            }),
            browserHeaders,
          ),
        },
      ),
    );
  });

  it('POST /register bodies', async function () {
    const uris = fc.oneof(fc.array(urlValue(fx), { maxLength: 3 }), hostileJson);
    const valid = <T>(arbitrary: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
      fc.oneof({ weight: 5, arbitrary }, { weight: 1, arbitrary: hostileJson });
    const statement = fc
      .record(
        {
          iss: fc.constantFrom('https://issuer.fuzz.test', 'https://untrusted.fuzz.test', ''),
          software_id: fc.oneof(fc.uuid(), fc.constantFrom('denied-software'), hostileText),
          granted_resources: fc.oneof(
            fc.constant([
              { type: 'urn:as:introspect', scopes: ['introspection', 'uma_protection', 'admin'] },
              { type: 'urn:fuzz:docs', scopes: ['read'] },
            ]),
            fc.constant([{ type: 'urn:unknown', scopes: 'x' }, null, 7]),
            hostileJson,
          ),
          grant_types: fc.oneof(
            fc.array(fc.constantFrom('authorization_code', 'refresh_token', 'client_credentials')),
            hostileJson,
          ),
          iat: fc.oneof(fc.constant(Math.floor(Date.now() / 1000)), hostileJson),
          software_version: deepValue,
        },
        { requiredKeys: ['iss'] },
      )
      .map((claims) => jwtOf({ alg: 'none' }, claims, ''));
    const metadata = someOf<unknown>(
      {
        redirect_uris: fc.oneof(
          {
            weight: 6,
            arbitrary: fc.array(
              fc.constantFrom('https://app.fuzz.test/cb', 'http://127.0.0.1:1/cb', 'com.example.app:/cb'),
              { minLength: 1, maxLength: 2 },
            ),
          },
          { weight: 1, arbitrary: uris },
        ),
        token_endpoint_auth_method: valid(
          fc.constantFrom(
            'none',
            'none',
            'client_secret_post',
            'client_secret_basic',
            'private_key_jwt',
            'client_secret_jwt',
            'tls_client_auth',
          ),
        ),
        grant_types: valid(
          fc.array(
            fc.constantFrom(
              'authorization_code',
              'refresh_token',
              'authorization_code',
              'refresh_token',
              'client_credentials',
              'implicit',
            ),
            { maxLength: 2 },
          ),
        ),
        response_types: valid(fc.array(fc.constantFrom('code', 'code', 'token', 'id_token', 'none'), { maxLength: 2 })),
        scope: valid(scopeValue(fx)),
        client_name: valid(hostileText),
        client_uri: valid(urlValue(fx)),
        logo_uri: valid(urlValue(fx)),
        tos_uri: urlValue(fx),
        policy_uri: urlValue(fx),
        contacts: valid(fc.array(fc.constantFrom('a@example.test', 'not-an-email', ''))),
        jwks_uri: fc.constantFrom('https://127.0.0.1:1/jwks', 'http://127.0.0.1:1/jwks', 'x'),
        jwks: valid(
          fc.constantFrom({ keys: [{ kty: 'EC', crv: 'P-256', x: 'AA', y: 'AA' }] }, { keys: 'x' }, { keys: [] }),
        ),
        software_id: valid(fc.uuid()),
        software_version: valid(fc.constantFrom('1.0', '')),
        software_statement: fc.oneof(
          { weight: 4, arbitrary: statement },
          { weight: 1, arbitrary: fc.constantFrom('a.b.c', ...fx.idTokens) },
          { weight: 1, arbitrary: hostileJson },
        ),
        tenant_id: valid(fc.constantFrom(...fx.knownTenants)),
        sector_identifier_uri: fc.constant('https://127.0.0.1:1/sector'),
        subject_type: fc.constantFrom('public', 'pairwise', 'x'),
        id_token_signed_response_alg: fc.constantFrom('RS256', 'none', 'HS256', 'x'),
        userinfo_signed_response_alg: fc.constantFrom('RS256', 'none', 'x'),
        post_logout_redirect_uris: uris,
        request_uris: uris,
        default_max_age: valid(fc.integer()),
        require_auth_time: valid(fc.boolean()),
        authorization_details_types: valid(fc.array(fc.constantFrom(...fx.rarTypes))),
        client_id: hostileJson,
        client_secret: hostileJson,
        registration_access_token: hostileJson,
      },
      ['redirect_uris'],
      4,
    );
    const body = fc.oneof(
      {
        weight: 8,
        arbitrary: jsonText(
          fc
            .tuple(
              metadata,
              fc.oneof(
                { weight: 5, arbitrary: fc.constant({}) },
                { weight: 1, arbitrary: fc.dictionary(hostileName, hostileJson, { maxKeys: 2 }) },
              ),
            )
            .map(([known, extra]) => ({ ...extra, ...known })),
        ),
      },
      { weight: 1, arbitrary: jsonText(hostileJson) },
    );
    await property(
      fc
        .record({
          body,
          type: fc.oneof({ weight: 10, arbitrary: fc.constant(JSON_TYPE) }, { weight: 1, arbitrary: contentType }),
          tenant: tenantHeader(fx),
          auth: fc.oneof(
            { weight: 5, arbitrary: fc.constant(undefined) },
            { weight: 1, arbitrary: authorizationHeader(fx) },
          ),
        })
        .map(({ body: text, type, tenant, auth }): Req => ({
          method: 'POST',
          path: '/register',
          headers: headerList([
            ['Content-Type', type],
            ['X-Tenant-Id', tenant],
            ['Authorization', auth],
          ]),
          body: text,
        })),
    );
  });

  it('GET and POST /userinfo', async function () {
    const auth = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...fx.accessTokens).map((token) => `Bearer ${token}`) },
      { weight: 3, arbitrary: authorizationHeader(fx) },
    );
    const headers = fc.tuple(auth, dpopHeader(fx)).map(([authorization, dpop]): [string, string | undefined][] => [
      ['Authorization', authorization],
      ['DPoP', dpop],
    ]);
    const pairs = parameters({
      access_token: mixed(fc.constantFrom(...fx.accessTokens)),
      schema: mixed(fc.constant('openid')),
      claims: hostileText,
      scope: scopeValue(fx),
    });
    await property(
      fc.oneof(queryRequest(fc.constant('/userinfo'), pairs, headers), formRequest('/userinfo', pairs, headers)),
    );
  });

  // -------------------------------------------------------------------------------------------
  // The Admin API

  describe('Admin API collections', function () {
    for (const definition of COLLECTIONS) {
      it(`${definition.path}: POST and PUT bodies`, async function () {
        const victims = fx.victims[definition.path] ?? [];
        const key = fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom(...victims).map(encodeURIComponent) },
          { weight: 1, arbitrary: pathSegment(hostileText) },
          {
            weight: 1,
            arbitrary: fc.constantFrom(
              '0',
              '-1',
              '1.5',
              '1e3',
              '99999999999999999999',
              '9007199254740993',
              '%zz',
              '..',
              '.',
            ),
          },
        );
        const upsert =
          definition.path === 'policy-rules'
            ? 'by-path?path='
            : definition.path === 'policy-data'
              ? 'by-key?dataKey='
              : undefined;
        const upsertKey =
          definition.path === 'policy-rules'
            ? fc.constantFrom('fuzz/a.rego', 'fuzz/victim.rego', 'fuzz/b/c.rego')
            : fc.constantFrom('fuzz_a', 'fuzz_victim', 'fuzz_b.c');
        const target = fc.oneof(
          { weight: 3, arbitrary: fc.constant({ method: 'POST', path: `/admin/api/${definition.path}` }) },
          { weight: 3, arbitrary: key.map((at) => ({ method: 'PUT', path: `/admin/api/${definition.path}/${at}` })) },
          ...(upsert
            ? [
                {
                  weight: 2,
                  arbitrary: mixed(upsertKey).map((value) => ({
                    method: 'PUT',
                    path: queryPath(
                      `/admin/api/${definition.path}/${upsert.split('?')[0]}`,
                      `${upsert.split('?')[1]}${encodeURIComponent(safeForUri(value))}`,
                    ),
                  })),
                },
              ]
            : []),
        );
        const body = fc.oneof(
          { weight: 10, arbitrary: jsonText(adminBody(definition.schema, fx)) },
          { weight: 1, arbitrary: jsonText(hostileJson) },
        );
        await property(
          fc
            .record({
              target,
              body,
              type: fc.oneof({ weight: 12, arbitrary: fc.constant(JSON_TYPE) }, { weight: 1, arbitrary: contentType }),
              key: adminKey(),
              tenant: tenantHeader(fx),
            })
            .map(({ target: at, body: text, type, key: apiKey, tenant }): Req => ({
              method: at.method,
              path: at.path,
              headers: headerList([
                ['Content-Type', type],
                ['X-Admin-API-Key', apiKey],
                ['X-Tenant-Id', tenant],
              ]),
              body: text,
            })),
        );
      });

      it(`${definition.path}: query strings`, async function () {
        const victims = fx.victims[definition.path] ?? [];
        const path = fc.oneof(
          { weight: 3, arbitrary: fc.constant(`/admin/api/${definition.path}`) },
          {
            weight: 2,
            arbitrary: mixed(fc.constantFrom(...victims)).map(
              (key) => `/admin/api/${definition.path}/${encodeURIComponent(safeForUri(key))}`,
            ),
          },
        );
        const pairs = parameters({
          tenantId: mixed(fc.constantFrom(...fx.knownTenants, 'unknown-tenant')),
          bundledOnly: mixed(fc.constantFrom('true', 'false', 'TRUE', '1')),
          allTenants: mixed(fc.constantFrom('true', 'false')),
          page: mixed(numberText),
          size: mixed(numberText),
          sort: mixed(fc.constantFrom('id,desc', 'createdAt,asc', 'clientId')),
          path: hostileText,
          dataKey: hostileText,
          clientId: hostileText,
        });
        await property(
          queryRequest(
            path,
            pairs,
            adminKey().map((key): [string, string | undefined][] => [['X-Admin-API-Key', key]]),
          ),
        );
      });
    }
  });

  it('Admin audit-log queries', async function () {
    const path = fc.oneof(
      { weight: 4, arbitrary: fc.constant('/admin/api/audit-logs') },
      {
        weight: 1,
        arbitrary: fc
          .oneof(fc.constantFrom('1', '0', '999999999', '1e3', '-1', '0x1', '1234567890123456'), hostileText)
          .map((id) => `/admin/api/audit-logs/${encodeURIComponent(safeForUri(id))}`),
      },
    );
    const pairs = parameters({
      endpoint: mixed(fc.constantFrom('/token', '/introspect', '/admin/api/clients', '/authorize')),
      tenantId: mixed(fc.constantFrom(...fx.knownTenants, 'unknown-tenant')),
      clientId: mixed(fc.constantFrom(...fx.confidential.map(({ clientId }) => clientId))),
      page: mixed(fc.oneof(fc.nat({ max: 5 }).map(String), numberText)),
      size: mixed(fc.oneof(fc.integer({ min: 1, max: 1000 }).map(String), numberText)),
      sort: mixed(
        fc
          .tuple(
            fc.constantFrom(
              ...fx.auditSortFields,
              'policyInput',
              'requestSummary.status',
              '__proto__',
              'id; DROP TABLE x',
            ),
            fc.constantFrom('asc', 'desc', 'ASC', 'Desc', 'sideways', '', 'asc,desc'),
          )
          .map(([field, direction]) => (direction ? `${field},${direction}` : field)),
      ),
      allTenants: mixed(fc.constantFrom('true', 'false')),
      outcome: mixed(fc.constantFrom('allow', 'deny', 'error')),
    });
    await property(
      queryRequest(
        path,
        pairs,
        adminKey().map((key): [string, string | undefined][] => [['X-Admin-API-Key', key]]),
      ),
    );
  });

  it('Admin API keys: creations, ids and pages', async function () {
    const ids = fc.oneof(
      { weight: 2, arbitrary: fc.constantFrom('1', '2', 'current', 'bootstrap') },
      { weight: 1, arbitrary: fc.constantFrom('0', '-1', '1.5', '1e3', '99999999999999999999', '%zz', '..') },
      { weight: 1, arbitrary: hostileText.map((text) => encodeURIComponent(safeForUri(text))) },
    );
    const target = fc.oneof(
      { weight: 3, arbitrary: fc.constant({ method: 'POST', path: '/admin/api/api-keys' }) },
      { weight: 1, arbitrary: ids.map((id) => ({ method: 'GET', path: `/admin/api/api-keys/${id}` })) },
      { weight: 1, arbitrary: ids.map((id) => ({ method: 'DELETE', path: `/admin/api/api-keys/${id}` })) },
      {
        weight: 1,
        arbitrary: fc.tuple(mixed(numberText), mixed(numberText)).map(([offset, limit]) => ({
          method: 'GET',
          path: `/admin/api/api-keys?offset=${encodeURIComponent(safeForUri(offset))}&limit=${encodeURIComponent(safeForUri(limit))}`,
        })),
      },
    );
    const body = fc.oneof(
      { weight: 10, arbitrary: jsonText(adminBody(API_KEY_INPUT_SCHEMA as unknown as Record<string, unknown>, fx)) },
      { weight: 1, arbitrary: jsonText(hostileJson) },
    );
    await property(
      fc.record({ target, body, key: adminKey() }).map(({ target: at, body: text, key }): Req => ({
        method: at.method,
        path: at.path,
        headers: headerList([
          ['Content-Type', at.method === 'POST' ? JSON_TYPE : undefined],
          ['X-Admin-API-Key', key],
        ]),
        body: at.method === 'POST' ? text : undefined,
      })),
    );
  });

  // -------------------------------------------------------------------------------------------
  // Across endpoints: headers, paths, repeated parameters, malformed and oversized bodies

  /** A valid-looking request to each endpoint family, for the families that vary one aspect of it. */
  function baseRequest(): fc.Arbitrary<Req> {
    const app = fx.confidential[0]!;
    const appBasic = basic(app.clientId, app.secret);
    return fc.constantFrom<Req>(
      {
        method: 'POST',
        path: '/token',
        headers: [
          ['Content-Type', FORM],
          ['Authorization', appBasic],
        ],
        body: 'grant_type=client_credentials&scope=read',
      },
      {
        method: 'POST',
        path: '/token',
        headers: [['Content-Type', FORM]],
        body: new URLSearchParams({
          grant_type: 'refresh_token',
          refresh_token: fx.refreshTokens.at(-1)!,
          client_id: fx.publicClients[0],
        }).toString(),
      },
      {
        method: 'POST',
        path: '/introspect',
        headers: [
          ['Content-Type', FORM],
          ['Authorization', `Bearer ${fx.callerTokens[0]}`],
        ],
        body: `token=${fx.accessTokens[0]}`,
      },
      {
        method: 'GET',
        path: `/authorize?${new URLSearchParams({ response_type: 'code', client_id: fx.publicClients[0], redirect_uri: fx.redirectUris[0], scope: 'openid', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256', state: 's' })}`,
        headers: [],
      },
      { method: 'GET', path: '/userinfo', headers: [['Authorization', `Bearer ${fx.accessTokens[0]}`]] },
      {
        method: 'POST',
        path: '/register',
        headers: [['Content-Type', JSON_TYPE]],
        body: JSON.stringify({ redirect_uris: ['https://app.fuzz.test/cb'], token_endpoint_auth_method: 'none' }),
      },
      { method: 'GET', path: '/admin/api/clients', headers: [['X-Admin-API-Key', ADMIN_KEY]] },
      {
        method: 'POST',
        path: '/admin/api/subjects',
        headers: [
          ['Content-Type', JSON_TYPE],
          ['X-Admin-API-Key', ADMIN_KEY],
        ],
        body: JSON.stringify({ subjectId: 'fuzz-header-subject' }),
      },
      { method: 'GET', path: '/admin/api/audit-logs?size=5', headers: [['X-Admin-API-Key', ADMIN_KEY]] },
      { method: 'GET', path: '/.well-known/openid-configuration', headers: [] },
      { method: 'GET', path: '/.well-known/jwks.json', headers: [] },
    );
  }

  it('header values: X-Tenant-Id, Authorization, DPoP, Content-Type and others', async function () {
    const hostile = fc.record(
      {
        'X-Tenant-Id': tenantHeader(fx),
        Authorization: authorizationHeader(fx),
        DPoP: dpopHeader(fx),
        'Content-Type': contentType,
        Cookie: cookieHeader(),
        'X-Admin-API-Key': fc.oneof(fc.constant(ADMIN_KEY), hostileText.map(headerSafe)),
        'Content-Encoding': fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'gzip, gzip', 'x'),
        'X-Forwarded-For': fc.constantFrom('10.0.0.1', '1.1.1.1, 2.2.2.2', 'garbage', '::1', ''),
        'X-Forwarded-Proto': fc.constantFrom('https', 'http', 'x', 'https,http'),
        'X-Forwarded-Host': fc.constantFrom('evil.example', '127.0.0.1:1', '', '[::1'),
        Accept: fc.constantFrom('text/html', 'application/json', '*/*', 'x', ''),
        Origin: fc.constantFrom('https://evil.example', 'null', ''),
      },
      { requiredKeys: [] },
    );
    await property(
      fc.tuple(baseRequest(), hostile, fc.boolean()).map(([base, extra, twice]): Req => {
        const replaced = Object.entries(extra).filter(
          (entry): entry is [string, string] => typeof entry[1] === 'string',
        );
        const kept = base.headers.filter(
          ([name]) => !replaced.some(([other]) => other.toLowerCase() === name.toLowerCase()),
        );
        // Now and then the same header twice (Node joins most repeated headers with ", ").
        const doubled = twice ? replaced.slice(0, 2) : [];
        return { ...base, headers: [...kept, ...replaced, ...doubled] };
      }),
    );
  });

  it('repeated parameters in query strings and forms are refused', async function () {
    const app = fx.confidential[0]!;
    const tokenForm = parameters(
      {
        grant_type: fc.constantFrom('client_credentials', 'authorization_code', 'refresh_token'),
        scope: scopeValue(fx),
        resource: urlValue(fx),
        code: mixed(fc.constantFrom(...fx.codes)),
        refresh_token: mixed(fc.constantFrom(...fx.refreshTokens)),
        client_id: fc.constantFrom(...fx.publicClients),
      },
      ['grant_type'],
    );
    const repeatedValues = fc.oneof(urlValue(fx), scopeValue(fx), hostileText);
    const standard = fc.constantFrom<Encoding>('standard', 'percent');
    const withKey = fc.constant<[string, string | undefined][]>([['X-Admin-API-Key', ADMIN_KEY]]);
    await property(
      fc.oneof(
        formRequest(
          '/token',
          repeatSome(tokenForm, repeatedValues),
          fc.constant([['Authorization', basic(app.clientId, app.secret)]]),
          standard,
        ).map((req) => ({
          ...req,
          headers: req.headers.filter(([name]) => name !== 'Content-Type').concat([['Content-Type', FORM]]),
        })),
        formRequest(
          '/introspect',
          repeatSome(
            parameters({ token: fc.constantFrom(...fx.accessTokens), token_type_hint: fc.constant('access_token') }, [
              'token',
            ]),
            repeatedValues,
          ),
          fc.constant([['Authorization', `Bearer ${fx.callerTokens[0]}`]]),
          standard,
        ).map((req) => ({
          ...req,
          headers: req.headers.filter(([name]) => name !== 'Content-Type').concat([['Content-Type', FORM]]),
        })),
        queryRequest(
          fc.constant('/authorize'),
          repeatSome(authorizeParameters(), repeatedValues),
          fc.constant([]),
          standard,
        ),
        queryRequest(
          fc.constantFrom('/userinfo', '/.well-known/openid-configuration'),
          repeatSome(
            parameters({ access_token: fc.constantFrom(...fx.accessTokens), scope: scopeValue(fx) }, ['scope']),
            repeatedValues,
          ),
          fc.constant([]),
          standard,
        ),
        queryRequest(
          fc.constantFrom(
            ...COLLECTIONS.map(({ path }) => `/admin/api/${path}`),
            '/admin/api/clients/fuzz-victim-client',
          ),
          repeatSome(
            parameters(
              {
                tenantId: fc.constantFrom(...fx.knownTenants, 'unknown-tenant'),
                bundledOnly: fc.constantFrom('true', 'false'),
              },
              ['tenantId'],
            ),
            repeatedValues,
          ),
          withKey,
          standard,
        ),
        queryRequest(
          fc.constant('/admin/api/audit-logs'),
          repeatSome(
            parameters(
              {
                endpoint: fc.constant('/token'),
                tenantId: fc.constantFrom(...fx.knownTenants),
                clientId: fc.constant(app.clientId),
                page: fc.constant('0'),
                size: fc.constant('5'),
                sort: fc.constant('id,desc'),
              },
              ['size'],
            ),
            repeatedValues,
          ),
          withKey,
          standard,
        ),
      ),
      // An unknown tenant header is refused before the parameters are looked at: still a 4xx.
      { refused: true },
    );
  });

  it('Admin paths in every spelling need the key', async function () {
    const transforms = [
      (text: string) => text.replace(/[a-z]/, (char) => `%${char.charCodeAt(0).toString(16)}`),
      (text: string) => text.replace(/[a-z]/, (char) => `%25${char.charCodeAt(0).toString(16)}`),
      (text: string) => `${text}/`,
      (text: string) => `/${text}`,
      (text: string) => `./${text}`,
      (text: string) => `x/../${text}`,
      (text: string) => `x/%2e%2e/${text}`,
      (text: string) => `${text};x`,
      (text: string) => `${text}%00`,
      (text: string) => `${text}\\`,
    ];
    // Letter case most often (a case-insensitive router matches it), then encodings, slashes and dot segments.
    const segment = (text: string) =>
      fc.oneof(
        { weight: 3, arbitrary: fc.mixedCase(fc.constant(text)) },
        { weight: 2, arbitrary: fc.constantFrom(...transforms).map((transform) => transform(text)) },
      );
    const collection = fc.constantFrom(...COLLECTIONS.map(({ path: name }) => name), 'audit-logs', '');
    const path = fc
      .tuple(
        segment('admin'),
        segment('api'),
        collection.chain((name) => (name ? segment(name).map((spelled) => `/${spelled}`) : fc.constant(''))),
        fc.option(pathSegment(hostileText), { freq: 1, nil: null }),
      )
      .map(([admin, api, rest, key]) => `/${admin}/${api}${rest}${key ? `/${key}` : ''}`);
    const body = fc.oneof(
      fc.constantFrom(
        '{"clientId":"spelled-client","clientType":"public"}',
        '{"subjectId":"spelled-subject"}',
        '{"issuer":"http://127.0.0.1:1"}',
      ),
      jsonText(hostileJson),
    );
    await property(
      fc
        .record({
          path,
          method: fc.constantFrom('GET', 'GET', 'POST', 'POST', 'PUT', 'DELETE', 'PATCH'),
          key: fc.oneof(
            fc.constant(undefined),
            fc.constantFrom('', 'x', `${ADMIN_KEY}x`, ADMIN_KEY.slice(0, -1), ADMIN_KEY.toUpperCase()),
            hostileText.map(headerSafe),
          ),
          body: fc.option(body),
        })
        .map(({ path: at, method, key, body }): Req => ({
          method,
          path: at,
          headers: headerList([
            ['X-Admin-API-Key', key],
            ['Content-Type', body === null ? undefined : JSON_TYPE],
          ]),
          ...(body === null ? {} : { body }),
        })),
      { notServed: true },
    );
  });

  it('malformed bodies: bad JSON, bad urlencoding, wrong content types, deep nesting, huge numbers, NUL', async function () {
    const endpoints = fc.constantFrom(
      { method: 'POST', path: '/token', admin: false },
      { method: 'POST', path: '/introspect', admin: false },
      { method: 'POST', path: '/register', admin: false },
      { method: 'POST', path: '/userinfo', admin: false },
      { method: 'POST', path: '/authorize', admin: false },
      ...COLLECTIONS.map(({ path }) => ({ method: 'POST', path: `/admin/api/${path}`, admin: true })),
      { method: 'PUT', path: '/admin/api/clients/fuzz-victim-client', admin: true },
      { method: 'PUT', path: '/admin/api/policy-data/by-key?dataKey=fuzz_victim', admin: true },
    );
    const body = fc.oneof(
      malformedJson,
      malformedForm,
      deepJson.map((nested) => nested.text),
      fc.uint8Array({ maxLength: 80 }),
      jsonText(hostileJson),
      fc.constantFrom(
        '{"clientId":"x","clientType":"public","redirectUris":["' + 'a'.repeat(5000) + '"]}',
        `{"subjectId":"${'\\u0000'.repeat(50)}"}`,
        '{"redirect_uris":["https://app.fuzz.test/cb"],"client_name":"\\ud800"}',
        '{"resourceServerId":1e400,"resourceTypeId":-0,"resourceIdentifier":"x"}',
      ),
    );
    const app = fx.confidential[0]!;
    await property(
      fc
        .record({
          endpoint: endpoints,
          body,
          type: contentType,
          auth: fc.constantFrom(undefined, basic(app.clientId, app.secret), `Bearer ${fx.callerTokens[0]}`),
          chunked: fc.boolean(),
        })
        .map(({ endpoint, body: payload, type, auth, chunked }): Req => ({
          method: endpoint.method,
          path: endpoint.path,
          headers: headerList([
            ['Content-Type', type],
            ['Authorization', auth],
            ['X-Admin-API-Key', endpoint.admin ? ADMIN_KEY : undefined],
          ]),
          body: payload,
          ...(chunked ? { chunked } : {}),
        })),
      { connectionReusable: true },
    );
  });

  it('deeply nested input is refused or audited: every audited request leaves its entry', async function () {
    const [app, rs] = fx.confidential;
    const nested = (depth: number, arrays: boolean) =>
      arrays ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const deep = fc
      .tuple(fc.constantFrom(2, 20, 40, 300, 1100, 3000), fc.boolean())
      .map(([depth, arrays]) => nested(depth, arrays));
    const form = (path: string, auth: string, pairs: fc.Arbitrary<Pairs>) =>
      pairs.map((entries): Req => ({
        method: 'POST',
        path,
        headers: [
          ['Content-Type', FORM],
          ['Authorization', auth],
        ],
        body: new URLSearchParams(entries).toString(),
      }));
    const json = (path: string, text: fc.Arbitrary<string>, headers: [string, string][] = []) =>
      text.map((body): Req => ({ method: 'POST', path, headers: [['Content-Type', JSON_TYPE], ...headers], body }));
    const requests = fc.oneof(
      form(
        '/token',
        basic(app!.clientId, app!.secret),
        fc.tuple(fc.constantFrom(...fx.rarTypes), deep).map(([type, value]): Pairs => [
          ['grant_type', 'client_credentials'],
          ['authorization_details', `[{"type":"${type}","deep":${value}}]`],
        ]),
      ),
      form(
        '/introspect',
        `Bearer ${fx.callerTokens[0]}`,
        fc.tuple(fc.constantFrom(...fx.accessTokens), deep).map(([token, value]): Pairs => [
          ['token', token],
          ['context', `{"resource":"https://api.fuzz.test/","deep":${value}}`],
        ]),
      ),
      form(
        '/introspect',
        basic(rs!.clientId, rs!.secret),
        fc.tuple(fc.constantFrom(...fx.accessTokens), deep).map(([token, value]): Pairs => [
          ['token', token],
          ['context', `{"deep":${value}}`],
        ]),
      ),
      json(
        '/register',
        deep.map(
          (value) =>
            `{"redirect_uris":["https://app.fuzz.test/cb"],"token_endpoint_auth_method":"none","jwks":{"keys":[]},"client_name":"n","x":${value}}`,
        ),
      ),
      json(
        '/register',
        deep.map((value) =>
          JSON.stringify({
            redirect_uris: ['https://app.fuzz.test/cb'],
            software_statement: `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(`{"iss":"https://issuer.fuzz.test","software_id":"s","deep":${value}}`).toString('base64url')}.`,
          }),
        ),
      ),
      json(
        '/admin/api/clients',
        fc
          .tuple(fc.nat(), deep)
          .map(
            ([n, value]) =>
              `{"clientId":"fuzz-deep-${n}","clientType":"public","softwareStatement":{"granted_resources":[],"deep":${value}}}`,
          ),
        [['X-Admin-API-Key', ADMIN_KEY]],
      ),
      json(
        '/admin/api/resource-servers',
        fc
          .tuple(fc.nat(), deep)
          .map(([n, value]) => `{"resourceIndicator":"https://deep-${n}.fuzz.test/","capability":{"deep":${value}}}`),
        [['X-Admin-API-Key', ADMIN_KEY]],
      ),
      deep.map((value): Req => ({
        method: 'GET',
        path: queryPath(
          '/authorize',
          new URLSearchParams({
            response_type: 'code',
            client_id: fx.publicClients[0],
            redirect_uri: fx.redirectUris[0],
            code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
            code_challenge_method: 'S256',
            claims: `{"userinfo":{"deep":${value}}}`,
          }).toString(),
        ),
        headers: [],
      })),
    );
    const entries = async () =>
      (await server.admin('GET', '/audit-logs?size=1&allTenants=true')).body.totalElements as number;
    await fc.assert(
      fc.asyncProperty(requests.map(printable), async (req) => {
        const before = await entries();
        const answer = await send(server.url, req);
        verify(req, answer);
        // The count's own read is audited too: one entry for it, one for the request (unless Node
        // refused the request line before Arbiter saw it: 431, a URL over 16 KiB).
        const written = (await entries()) - before;
        if (written !== (answer.status === 431 ? 1 : 2))
          throw new Error(
            `the request left ${written - 1} audit entries, not 1: ${answer.status} ${answer.text.slice(0, 200)}\n  request: ${oneLine(req)}`,
          );
      }),
      { numRuns: Math.max(30, Math.round(RUNS / 4)), ...(SEED === undefined ? {} : { seed: SEED }) },
    );
  });

  it('oversized bodies (over MAX_BODY_BYTES) are refused, not failed', async function () {
    const limit = server.config.maxBodyBytes;
    expect1MiB(limit);
    const endpoint = fc.constantFrom(
      { method: 'POST', path: '/token', type: FORM, prefix: 'grant_type=client_credentials&scope=' },
      { method: 'POST', path: '/introspect', type: FORM, prefix: 'token=' },
      { method: 'POST', path: '/register', type: JSON_TYPE, prefix: '{"client_name":"' },
      { method: 'POST', path: '/admin/api/clients', type: JSON_TYPE, prefix: '{"clientId":"' },
      {
        method: 'PUT',
        path: '/admin/api/policy-data/by-key?dataKey=fuzz_big',
        type: JSON_TYPE,
        prefix: '{"payload":"',
      },
      { method: 'POST', path: '/userinfo', type: FORM, prefix: 'access_token=' },
    );
    const app = fx.confidential[0]!;
    await property(
      fc
        .record({ endpoint, extra: fc.constantFrom(1, 4096, 512 * 1024), chunked: fc.boolean() })
        .map(({ endpoint: at, extra, chunked }): Req => ({
          method: at.method,
          path: at.path,
          headers: [
            ['Content-Type', at.type],
            ['X-Admin-API-Key', ADMIN_KEY],
            ['Authorization', basic(app.clientId, app.secret)],
          ],
          body: { prefix: at.prefix, fill: 'a', bytes: limit + extra },
          ...(chunked ? { chunked } : {}),
        })),
      { refused: true, connectionReusable: true },
      OVERSIZED_RUNS,
    );
  });
});

function expect1MiB(limit: number): void {
  if (limit !== MIB) throw new Error(`the suite assumes MAX_BODY_BYTES of 1 MiB, the server has ${limit}`);
}
