import { expect } from 'chai';
import fc from 'fast-check';
import * as client from 'openid-client';
import { FetchUserAgent } from '../support/browser.js';
import { arrivingAt, passDevIdpForms, startRegisteredDevIdp, type RegisteredDevIdp } from '../support/dev-idp.js';
import {
  AUTHORIZE_REGO,
  TOKEN_REGO,
  authorizeSeed,
  decide,
  tokenSeed,
  type Decided,
  type Detail,
} from '../support/invariant.js';
import {
  basic,
  clientCredentials,
  confidentialClient,
  type JsonResponse,
  policyInForce,
  postForm,
  updateOauthData,
} from '../support/oauth.js';
import { readyServer, type TestServer } from '../support/server.js';

/**
 * The invariant "the client gets exactly what the policy granted, never more", property-based.
 *
 * Rules installed once (test/support/invariant.ts) grant a deterministic pseudo-random subset of
 * every request: the test chooses each decision's seed (the `state` at /authorize, the
 * `resource_types` parameter at /token) and recomputes what was granted. fast-check then drives
 * browser sessions (one FetchUserAgent per case, several sign-ins in it) through the code flow,
 * refreshes (asking for everything, fewer, or more scopes) and client_credentials, with and
 * without resource indicators and authorization_details, and now and then with what a client
 * may try at /token: authorization_details of its own, another resource, a scope parameter on
 * the code exchange, a claims request (which puts the scopes carrying its claims before the
 * authorize decision, and gets the claims of those it granted). It checks every token issued: its scope and
 * authorization details against the decision, the request and the authorization; introspection,
 * UserInfo and the ID token; the earlier tokens of the session unchanged; and (for some cases)
 * the audit log's decision against the recomputation.
 *
 * FUZZ_RUNS sets the number of cases (default 200); FUZZ_SEED replays a reported seed;
 * FUZZ_SURVEY=1 lists every kind of violation found instead of stopping at the first;
 * FUZZ_STATS=1 prints how often each situation came up.
 */
const RUNS = Math.max(1, Number(process.env.FUZZ_RUNS) || 200);
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const SURVEY = Boolean(process.env.FUZZ_SURVEY);

const SPA = 'inv-spa';
const M2M = 'inv-m2m';
const RS = 'inv-rs';
const REDIRECT_URI = 'http://127.0.0.1:1/invariant/callback';
const REGISTERED_API = 'https://api.invariant.example.test/';
const UNREGISTERED_API = 'https://elsewhere.invariant.example.test/';
const RAR_TYPES = ['urn:inv:payment', 'urn:inv:account', 'urn:inv:files'];
const USER_SCOPES = ['openid', 'profile', 'email', 'read', 'write', 'admin'];
const MACHINE_SCOPES = ['profile', 'email', 'read', 'write', 'admin'];
const OIDC_CLAIMS: Record<string, string[]> = {
  openid: ['sub'],
  profile: ['name', 'preferred_username'],
  email: ['email', 'email_verified'],
};

// ---------------------------------------------------------------------------------------------
// What fast-check generates

interface CodeStep {
  kind: 'code';
  state: string;
  nonce: string | null;
  request: { scopes: string[]; resource: string | null } | { details: Detail[] };
  /** The resource indicator at the code exchange: the authorized one (if any), none, or another one. */
  resourceAtToken: ResourceAtToken;
  /** Also send an OpenID Connect claims request for every claim (ignored unless openid is asked for). */
  claims: boolean;
  /** Also send a scope parameter naming every scope with the code exchange (RFC 6749 has none). */
  scopeAtToken: boolean;
  /** authorization_details of the client's own, sent with the code exchange. */
  tamper: Tamper | null;
  marker: string;
  refreshes: RefreshStep[];
  audit: boolean;
}

interface RefreshStep {
  ask: 'all' | 'fewer' | 'more';
  mask: boolean[];
  resource: ResourceAtToken;
  tamper: Tamper | null;
  marker: string;
}

interface MachineStep {
  kind: 'cc';
  scopes: string[];
  resource: string | null;
  details: Detail[];
  marker: string;
  audit: boolean;
}

type Tamper = 'inflate' | 'add';
type ResourceAtToken = 'same' | 'omit' | 'other';
type Step = CodeStep | MachineStep;

interface Case {
  login: string;
  steps: Step[];
}

const hex = fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 6, maxLength: 12 });
const detail: fc.Arbitrary<Detail> = fc.record({
  type: fc.constantFrom(...RAR_TYPES),
  actions: fc.subarray(['read', 'write', 'pay'], { minLength: 1 }),
  limit: fc.integer({ min: 1, max: 10_000 }),
});
const details = fc.uniqueArray(detail, { minLength: 1, maxLength: 3, selector: (item) => item.type });
const resource = fc.constantFrom(null, null, null, REGISTERED_API, UNREGISTERED_API);
/** Now and then (one in six) the client sends authorization_details of its own at /token. */
const tamper = fc.oneof(
  { weight: 5, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.constantFrom<Tamper>('inflate', 'add') },
);
const rarely = fc.integer({ min: 0, max: 5 }).map((n) => n === 0);
const resourceAtToken = fc.constantFrom<ResourceAtToken>('same', 'same', 'omit', 'omit', 'other');

const refreshStep: fc.Arbitrary<RefreshStep> = fc.record({
  ask: fc.constantFrom<RefreshStep['ask']>('all', 'fewer', 'fewer', 'more'),
  mask: fc.array(fc.boolean(), { minLength: USER_SCOPES.length, maxLength: USER_SCOPES.length }),
  resource: fc.constantFrom<ResourceAtToken>('omit', 'omit', 'omit', 'same', 'other'),
  tamper,
  marker: hex,
});

const codeStep: fc.Arbitrary<CodeStep> = fc.record({
  kind: fc.constant('code' as const),
  state: hex,
  nonce: fc.option(hex),
  request: fc.oneof(
    { weight: 3, arbitrary: fc.record({ scopes: fc.subarray(USER_SCOPES, { minLength: 1 }), resource }) },
    { weight: 1, arbitrary: fc.record({ details }) },
  ),
  resourceAtToken,
  claims: rarely,
  scopeAtToken: rarely,
  tamper,
  marker: hex,
  refreshes: fc.array(refreshStep, { maxLength: 2 }),
  audit: rarely,
});

const machineStep: fc.Arbitrary<MachineStep> = fc.record({
  kind: fc.constant('cc' as const),
  scopes: fc.subarray(MACHINE_SCOPES),
  resource,
  details: fc.oneof(fc.constant([] as Detail[]), details),
  marker: hex,
  audit: rarely,
});

const sessions: fc.Arbitrary<Case> = fc.record({
  login: fc.constantFrom('erin', 'frank', 'grace'),
  steps: fc.array(fc.oneof({ weight: 4, arbitrary: codeStep }, { weight: 1, arbitrary: machineStep }), {
    minLength: 1,
    maxLength: 3,
  }),
});

// ---------------------------------------------------------------------------------------------
// Checking

/** How often each kind of situation came up (FUZZ_STATS=1 prints it): the generators' reach. */
const tallies = new Map<string, number>();
const tally = (what: string) => tallies.set(what, (tallies.get(what) ?? 0) + 1);

/** A way the server gave more (or other) than the policy granted. */
class Violation extends Error {
  constructor(
    readonly kind: string,
    detail: string,
  ) {
    super(`${kind}: ${detail}`);
  }
}

/** An issued access token and what it showed when issued. */
interface Snapshot {
  label: string;
  token: string;
  introspection: unknown;
  userinfo: { status: number; body: unknown };
}

/** A token response for the trace: token values elided. */
const masked = (body: any) =>
  show(
    body && typeof body === 'object'
      ? Object.fromEntries(Object.entries(body).map(([key, value]) => [key, /_token$/.test(key) ? '…' : value]))
      : body,
  );
const words = (scope: unknown): string[] => (typeof scope === 'string' ? scope.split(' ').filter(Boolean) : []);
const show = (value: unknown) => JSON.stringify(value);
const sameJson = (a: unknown, b: unknown) => show(canonical(a)) === show(canonical(b));

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, canonical(v)]),
    );
  return value;
}

function check(condition: boolean, kind: string, detail: () => string): void {
  if (!condition) throw new Violation(kind, detail());
}

function subset(actual: string[], allowed: string[], kind: string, what: string): void {
  const extra = actual.filter((scope) => !allowed.includes(scope));
  check(extra.length === 0, kind, () => `${what} ${show(actual)} has ${show(extra)} beyond ${show(allowed)}`);
}

function detailsWithin(actual: Detail[], allowed: Detail[], kind: string, what: string): void {
  const extra = actual.filter((item) => !allowed.some((granted) => sameJson(granted, item)));
  check(extra.length === 0, kind, () => `${what} ${show(actual)} has ${show(extra)}, not among ${show(allowed)}`);
}

function idTokenClaims(idToken: unknown): Record<string, unknown> | null {
  if (typeof idToken !== 'string') return null;
  return JSON.parse(Buffer.from(idToken.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** Claims UserInfo (or an ID token) may show for `scopes`. */
function claimsFor(scopes: string[]): Set<string> {
  return new Set(scopes.flatMap((scope) => OIDC_CLAIMS[scope] ?? []));
}

/** An OpenID Connect claims request for every claim there is. */
const ALL_CLAIMS = Object.fromEntries(
  Object.values(OIDC_CLAIMS)
    .flat()
    .map((claim) => [claim, null]),
);

const PROTOCOL_CLAIMS = new Set([
  'iss',
  'aud',
  'exp',
  'iat',
  'auth_time',
  'nonce',
  'acr',
  'amr',
  'azp',
  'at_hash',
  'c_hash',
  's_hash',
  'sid',
  'jti',
]);

describe('Exact grants, property-based: every token carries what the policy granted, never more', function () {
  this.timeout(120_000 + RUNS * 3_000);
  let server: TestServer;
  let idp: RegisteredDevIdp;
  let m2mSecret: string;
  let rsSecret: string;
  let caller = '';

  before(async function () {
    this.timeout(120_000);
    // Its own server: the test replaces policy rules and data.
    server = await readyServer();
    idp = await startRegisteredDevIdp(server);
    const spa = await server.admin('POST', '/clients', {
      clientId: SPA,
      clientType: 'public',
      tokenEndpointAuthMethod: 'none',
      redirectUris: [REDIRECT_URI],
      scopes: USER_SCOPES,
    });
    expect(spa.status, show(spa.body)).to.equal(201);
    m2mSecret = await confidentialClient(server, M2M, { scopes: MACHINE_SCOPES });
    rsSecret = await confidentialClient(server, RS, { scopes: ['introspection'] });
    const api = await server.admin('POST', '/resource-servers', {
      resourceIndicator: REGISTERED_API,
      name: 'Invariant API',
    });
    expect(api.status, show(api.body)).to.equal(201);
    for (const [path, content] of [
      ['arbiter/authorize/authorize.rego', AUTHORIZE_REGO],
      ['arbiter/token/token.rego', TOKEN_REGO],
    ] as const) {
      const saved = await server.admin('PUT', `/policy-rules/by-path?path=${encodeURIComponent(path)}`, {
        version: null,
        kind: 'rego',
        path,
        content,
      });
      expect(saved.status, show(saved.body)).to.be.oneOf([200, 201]);
    }
    // Also waits until OPA serves the rules written just before.
    await updateOauthData(server, (data) => {
      data.rar_only_types = Object.fromEntries(RAR_TYPES.map((type) => [type, { description: 'invariant test' }]));
    });
    await policyInForce(server);
    await renewCaller();
  });

  after(async function () {
    await idp?.close();
    await server?.close();
  });

  // --- protocol helpers ---------------------------------------------------------------------

  async function renewCaller(): Promise<void> {
    const { status, body } = await clientCredentials(server, RS, rsSecret, { scope: 'introspection' });
    if (status !== 200 || !words(body.scope).includes('introspection'))
      throw new Error(`no introspection caller token: ${status} ${show(body)}`);
    caller = body.access_token;
  }

  async function introspect(token: string, hint?: string): Promise<any> {
    let response = await postForm(
      server,
      '/introspect',
      { token, ...(hint ? { token_type_hint: hint } : {}) },
      { Authorization: `Bearer ${caller}` },
    );
    if (response.status === 401) {
      await renewCaller();
      response = await postForm(
        server,
        '/introspect',
        { token, ...(hint ? { token_type_hint: hint } : {}) },
        { Authorization: `Bearer ${caller}` },
      );
    }
    if (response.status !== 200) throw new Error(`introspection answered ${response.status}: ${show(response.body)}`);
    return response.body;
  }

  async function userinfo(token: string): Promise<{ status: number; body: unknown }> {
    const response = await server.request('/userinfo', { headers: { Authorization: `Bearer ${token}` } });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  }

  /** Signs in (or reuses the agent's session); returns the code, or the error the client was sent back with when `refusal` is set. */
  async function authorize(
    agent: FetchUserAgent,
    login: string,
    parameters: Record<string, string>,
    refusal = false,
  ): Promise<{ code: string; verifier: string; query: URLSearchParams }> {
    const verifier = client.randomPKCECodeVerifier();
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: SPA,
      redirect_uri: REDIRECT_URI,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      ...parameters,
    });
    let page = await agent.navigate(`${server.config.issuer}/authorize?${query}`, arrivingAt(REDIRECT_URI));
    if (page.url.host === idp.host) page = await passDevIdpForms(agent, page, login, arrivingAt(REDIRECT_URI));
    if (!page.url.href.startsWith(REDIRECT_URI))
      throw new Error(
        `the authorization did not return to the client: ${page.status} ${page.url.href} ${page.body?.slice(0, 300)}`,
      );
    const code = page.url.searchParams.get('code');
    if (refusal && !code) return { code: '', verifier, query: page.url.searchParams };
    if (!code) throw new Error(`no code: ${page.url.href}`);
    return { code, verifier, query: page.url.searchParams };
  }

  /** The latest decisions as the audit log has them, to set a counterexample against the server's own record. */
  async function auditTail(): Promise<string> {
    const { body } = await server.admin('GET', '/audit-logs?size=12&sort=id,desc');
    const decisions = (body?.content ?? [])
      .filter((entry: any) => entry.policyDecision && !entry.endpoint.startsWith('/introspect'))
      .slice(0, 3)
      .map(
        (entry: any) =>
          `${entry.endpoint.replace(/^(\/authorize)\/.*/, '$1/…')} ${entry.requestSummary?.status}: asked ${show(entry.policyInput?.request?.scopes)} ${show(entry.policyInput?.request?.authorization_details)}, granted ${show(entry.policyDecision.scopes)} ${show(entry.policyDecision.authorization_details)}`,
      );
    return `audit log, latest decisions first:\n      ${decisions.join('\n      ')}`;
  }

  async function lastAudit(predicate: (entry: any) => boolean): Promise<any> {
    const { body } = await server.admin('GET', '/audit-logs?size=20&sort=id,desc');
    const entry = (body.content as any[]).find(predicate);
    if (!entry) throw new Error('no matching audit log entry');
    return entry;
  }

  /** The audited decision (and what it was asked) is the one the test recomputed. */
  async function auditedDecisionIs(
    endpoint: string,
    requested: string[],
    expected: Decided,
    what: string,
  ): Promise<void> {
    const entry = await lastAudit((item) => item.endpoint.startsWith(endpoint) && item.policyDecision);
    const decision = entry.policyDecision;
    check(
      sameJson([...entry.policyInput.request.scopes].sort(), [...new Set(requested)].sort()),
      'audit: decision input scopes differ from the model',
      () => `${what}: audited input scopes ${show(entry.policyInput.request.scopes)}, model ${show(requested)}`,
    );
    check(
      decision.allow === true &&
        sameJson(decision.scopes, expected.scopes) &&
        sameJson(decision.authorization_details, expected.authorization_details) &&
        sameJson(decision.obligations, expected.obligations) &&
        sameJson(decision.extensions, expected.extensions),
      'audit: decision differs from the recomputation',
      () => `${what}: audited ${show(decision)}, recomputed ${show(expected)}`,
    );
  }

  // --- what every issued access token must show ---------------------------------------------

  interface Expectation {
    label: string;
    response: JsonResponse;
    decided: Decided;
    /** What the decision was asked for (the scope model of the request). */
    requested: string[];
    /** What the authorization granted (code flow) and the client asked for at /authorize. */
    ceiling: { scopes: string[]; details: Detail[] } | null;
    clientId: string;
    sub: string | null;
    nonce?: string | null;
    /**
     * The claims a `claims` request named that the authorize decision granted (a scope carrying
     * them): released in the ID token and at UserInfo beyond the token's own scopes.
     */
    claimsGranted?: Set<string>;
  }

  async function issuedToken(expectation: Expectation): Promise<Snapshot> {
    const { label, response, decided, requested, ceiling, clientId, sub } = expectation;
    const claimsGranted = expectation.claimsGranted ?? new Set<string>();
    const withGranted = (claims: Set<string>) => new Set([...claims, ...claimsGranted]);
    const { body } = response;
    check(
      response.status === 200 && typeof body?.access_token === 'string',
      'no token issued',
      () => `${label}: ${response.status} ${show(body)}`,
    );
    const scopes = words(body.scope);
    subset(scopes, decided.scopes, 'token scope beyond the token decision', `${label}: scope`);
    subset(scopes, requested, 'token scope beyond what was requested', `${label}: scope`);
    const details = (body.authorization_details ?? []) as Detail[];
    check(
      sameJson(details, decided.authorization_details),
      'token authorization_details differ from the decision',
      () => `${label}: response ${show(body.authorization_details)}, decision ${show(decided.authorization_details)}`,
    );
    if (ceiling) {
      subset(scopes, ceiling.scopes, 'token scope beyond the authorize decision', `${label}: scope`);
      detailsWithin(
        details,
        ceiling.details,
        'token authorization_details beyond the authorize decision',
        `${label}: authorization_details`,
      );
    }

    const idClaims = idTokenClaims(body.id_token);
    if (idClaims) {
      check(
        decided.scopes.includes('openid') && (!ceiling || ceiling.scopes.includes('openid')),
        'ID token without a granted openid',
        () => `${label}: id_token ${show(idClaims)}, decision ${show(decided.scopes)}`,
      );
      const allowed = withGranted(claimsFor(decided.scopes.filter((scope) => requested.includes(scope))));
      const extra = Object.keys(idClaims).filter((claim) => !PROTOCOL_CLAIMS.has(claim) && !allowed.has(claim));
      check(
        extra.length === 0,
        'ID token claims beyond the granted scopes',
        () => `${label}: id_token claims ${show(extra)} with granted ${show(decided.scopes)}`,
      );
      if (expectation.nonce)
        check(
          idClaims.nonce === expectation.nonce,
          'ID token nonce',
          () => `${label}: nonce ${show(idClaims.nonce)}, sent ${expectation.nonce}`,
        );
    }

    const introspection = await introspect(body.access_token);
    const expected: Record<string, unknown> = {
      active: true,
      scope: scopes.length ? scopes.join(' ') : undefined,
      client_id: clientId,
      sub: sub ?? undefined,
      authorization_details: details.length ? details : undefined,
      obligations: decided.obligations,
      extensions: decided.extensions,
    };
    const shown = Object.fromEntries(Object.keys(expected).map((key) => [key, introspection[key]]));
    check(
      sameJson(shown, JSON.parse(show(expected))),
      'introspection differs from the issued token and its decision',
      () => `${label}: introspection ${show(introspection)}, expected ${show(expected)}`,
    );

    const info = await userinfo(body.access_token);
    if (info.status === 200) {
      check(
        Boolean(sub) && scopes.includes('openid'),
        'UserInfo answers a token without openid',
        () => `${label}: scope ${show(scopes)}, UserInfo ${show(info.body)}`,
      );
      const allowed = withGranted(claimsFor(scopes));
      const claims = Object.keys(info.body as object);
      const extra = claims.filter((claim) => !allowed.has(claim));
      check(
        extra.length === 0,
        'UserInfo claims beyond the issued scopes',
        () => `${label}: claims ${show(extra)} with scope ${show(scopes)}`,
      );
      if (ceiling)
        subset(
          claims.filter((claim) => claim !== 'sub'),
          [...withGranted(claimsFor(ceiling.scopes))],
          'UserInfo claims beyond the authorize decision',
          `${label}: claims`,
        );
    }
    tally(`access token checked (UserInfo ${info.status})`);
    return { label, token: body.access_token, introspection, userinfo: info };
  }

  async function unchanged(snapshots: Snapshot[]): Promise<void> {
    for (const snapshot of snapshots) {
      tally('earlier token re-checked');
      const [introspection, info] = await Promise.all([introspect(snapshot.token), userinfo(snapshot.token)]);
      check(
        sameJson(introspection, snapshot.introspection),
        'an earlier token changed (introspection)',
        () => `${snapshot.label}: was ${show(snapshot.introspection)}, now ${show(introspection)}`,
      );
      check(
        sameJson(info, snapshot.userinfo),
        'an earlier token changed (UserInfo)',
        () => `${snapshot.label}: was ${show(snapshot.userinfo)}, now ${show(info)}`,
      );
    }
  }

  /** The resource indicator a token request names: the authorized one, none, or one it was not authorized for. */
  function resourceFor(choice: ResourceAtToken, authorized: string | null): string | null {
    if (choice === 'same') return authorized;
    if (choice === 'other') return authorized === REGISTERED_API ? UNREGISTERED_API : REGISTERED_API;
    return null;
  }

  /** authorization_details of the client's own: the granted ones with a larger limit, or another type added. */
  function tampered(kind: Tamper, granted: Detail[]): Detail[] {
    if (kind === 'inflate' && granted.length)
      return granted.map((item) => ({ ...item, limit: Number(item.limit ?? 0) * 1000 + 1 }));
    const missing = RAR_TYPES.find((type) => !granted.some((item) => item.type === type)) ?? RAR_TYPES[0]!;
    return [...granted, { type: missing, actions: ['pay'], limit: 1_000_000 }];
  }

  // --- the steps ------------------------------------------------------------------------------

  async function codeStep(
    agent: FetchUserAgent,
    login: string,
    step: CodeStep,
    n: number,
    trace: string[],
  ): Promise<Snapshot[]> {
    const parameters: Record<string, string> = { state: step.state };
    let asked: string[] = [];
    let askedDetails: Detail[] = [];
    let resource: string | null = null;
    if ('scopes' in step.request) {
      asked = step.request.scopes;
      parameters.scope = asked.join(' ');
      if (step.request.resource) parameters.resource = resource = step.request.resource;
      if (step.nonce && asked.includes('openid')) parameters.nonce = step.nonce;
      if (step.claims && asked.includes('openid'))
        parameters.claims = show({ userinfo: ALL_CLAIMS, id_token: ALL_CLAIMS });
    } else {
      askedDetails = step.request.details;
      parameters.authorization_details = show(askedDetails);
    }
    // A claims request puts the scopes carrying its claims before the authorize decision too.
    const decisionScopes = parameters.claims ? [...new Set([...asked, ...Object.keys(OIDC_CLAIMS)])] : asked;
    const granted = decide(authorizeSeed(step.state), decisionScopes, askedDetails);
    const claimsGranted = parameters.claims ? claimsFor(granted.scopes) : new Set<string>();
    // Every token decision of the code asks for the scopes of its claims again (token-input.ts);
    // a token releases them only under those its own decision granted (userinfo/accounts.ts).
    const claimScopes = parameters.claims ? Object.keys(OIDC_CLAIMS) : [];
    const withClaims = (scopes: string[]) => [...new Set([...scopes, ...claimScopes])];
    const claimsUnder = (decidedScopes: string[]) =>
      new Set([...claimsGranted].filter((claim) => claimsFor(decidedScopes).has(claim)));
    trace.push(`#${n} GET /authorize ${show(parameters)}; decision (recomputed) ${show(granted)}`);
    // Nothing granted and no authorization_details asked for: oidc-provider refuses the request.
    const refused = !granted.scopes.some((scope) => asked.includes(scope)) && askedDetails.length === 0;
    const { code, verifier, query } = await authorize(agent, login, parameters, refused);
    check(query.get('state') === step.state, 'state not returned', () => `#${n}: ${query}`);
    trace.push(`#${n}   back at the client with ${[...query.keys()].join(', ')}`);
    tally(
      `authorize: ${askedDetails.length ? 'authorization_details' : resource ? 'scopes and resource' : 'scopes'}${refused ? ', nothing granted' : ''}`,
    );
    if (refused) {
      check(
        !code && query.get('error') === 'access_denied',
        'a code although the authorize decision granted nothing',
        () => `#${n}: ${query}`,
      );
      if (step.audit) await auditedDecisionIs('/authorize', decisionScopes, granted, `#${n} authorize`);
      return [];
    }
    if (step.audit) await auditedDecisionIs('/authorize', decisionScopes, granted, `#${n} authorize`);
    const ceiling = {
      scopes: granted.scopes.filter((scope) => asked.includes(scope)),
      details: granted.authorization_details,
    };

    // The code exchange asks for what the code carries: the granted scopes and details.
    const form: Record<string, string> = {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT_URI,
      client_id: SPA,
      code_verifier: verifier,
      resource_types: `urn:inv:seed:${step.marker}`,
    };
    const atToken = resourceFor(step.resourceAtToken, resource);
    if (atToken) form.resource = atToken;
    if (step.scopeAtToken) form.scope = USER_SCOPES.join(' ');
    const sentDetails = step.tamper ? tampered(step.tamper, ceiling.details) : null;
    if (sentDetails) form.authorization_details = show(sentDetails);
    const decided = decide(
      tokenSeed(SPA, 'authorization_code', form.resource_types!),
      withClaims(ceiling.scopes),
      sentDetails ?? ceiling.details,
    );
    trace.push(`#${n} POST /token ${show({ ...form, code: '…', code_verifier: '…' })}`);
    const response = await postForm(server, '/token', form);
    trace.push(`#${n}   ${response.status} ${masked(response.body)}; token decision (recomputed) ${show(decided)}`);
    if (sentDetails) tally(`code exchange with the client's own authorization_details: ${response.status}`);
    if (decided.scopes.length < ceiling.scopes.length) tally('code exchange: the token decision narrowed the scopes');
    if (response.status === 200 && !resource && !askedDetails.length)
      tally(
        `code exchange without resource: token scope ${sameJson(words(response.body.scope).sort(), decided.scopes) ? '=' : '≠'} decision`,
      );
    if (step.resourceAtToken === 'other') tally(`code exchange naming another resource: ${response.status}`);
    // Refusing the client's own authorization_details, or another resource, is fine.
    if ((sentDetails || step.resourceAtToken === 'other') && response.status === 400) return [];
    const snapshots = [
      await issuedToken({
        label: `#${n} code exchange`,
        response,
        decided,
        requested: ceiling.scopes,
        ceiling,
        clientId: SPA,
        sub: login,
        nonce: parameters.nonce,
        claimsGranted: claimsUnder(decided.scopes),
      }),
    ];
    if (step.audit) await auditedDecisionIs('/token', withClaims(ceiling.scopes), decided, `#${n} code exchange`);

    let refreshToken: string | undefined = response.body.refresh_token;
    for (const [r, refresh] of step.refreshes.entries()) {
      if (!refreshToken) break;
      const held = await introspect(refreshToken, 'refresh_token');
      check(held.active === true, 'refresh token inactive', () => `#${n}.${r}: ${show(held)}`);
      const heldScopes = words(held.scope);
      subset(
        heldScopes,
        ceiling.scopes,
        'refresh token scope beyond the authorize decision',
        `#${n}.${r}: refresh token scope`,
      );
      const heldDetails = (held.authorization_details ?? []) as Detail[];
      detailsWithin(
        heldDetails,
        ceiling.details,
        'refresh token authorization_details beyond the authorize decision',
        `#${n}.${r}: refresh token authorization_details`,
      );

      const rform: Record<string, string> = {
        grant_type: 'refresh_token',
        refresh_token: refreshToken,
        client_id: SPA,
        resource_types: `urn:inv:seed:${refresh.marker}`,
      };
      let requested = heldScopes;
      if (refresh.ask === 'fewer') {
        const fewer = heldScopes.filter((_, i) => refresh.mask[i]);
        if (fewer.length) requested = fewer;
      }
      const beyond = refresh.ask === 'more' ? USER_SCOPES.find((scope) => !heldScopes.includes(scope)) : undefined;
      if (beyond) rform.scope = [...heldScopes, beyond].join(' ');
      else if (requested !== heldScopes) rform.scope = requested.join(' ');
      const rResource = resourceFor(refresh.resource, resource);
      if (rResource) rform.resource = rResource;
      const rDetails = refresh.tamper ? tampered(refresh.tamper, heldDetails) : null;
      if (rDetails) rform.authorization_details = show(rDetails);
      trace.push(
        `#${n}.${r} POST /token ${show({ ...rform, refresh_token: '…' })} (refresh token holds ${show(heldScopes)} ${show(heldDetails)})`,
      );
      const refreshed = await postForm(server, '/token', rform);
      const rDecided = decide(
        tokenSeed(SPA, 'refresh_token', rform.resource_types!),
        withClaims(requested),
        rDetails ?? heldDetails,
      );
      trace.push(`#${n}.${r}   ${refreshed.status} ${masked(refreshed.body)}; decision (recomputed) ${show(rDecided)}`);
      tally(
        `refresh asking for ${beyond ? 'more' : rform.scope ? 'fewer' : 'what it holds'}${refresh.resource === 'other' ? ', naming another resource' : ''}${rDetails ? ", with the client's own authorization_details" : ''}: ${refreshed.status}`,
      );
      if (beyond) {
        check(
          refreshed.status === 400 && refreshed.body?.error === 'invalid_scope',
          'a refresh asking for more than the refresh token holds was not refused',
          () => `#${n}.${r}: ${refreshed.status} ${show(refreshed.body)}`,
        );
        continue;
      }
      // Refusing the client's own authorization_details, or another resource, is fine, and costs
      // the client nothing: the refresh token is checked before it is consumed.
      if ((rDetails || refresh.resource === 'other') && refreshed.status === 400) continue;
      // A refresh the policy grants none of the requested scopes is refused (oidc-provider would
      // read "no scope" as "everything the refresh token holds").
      if (requested.length && !requested.some((scope) => rDecided.scopes.includes(scope))) {
        tally('refresh: the decision granted none of the requested scopes');
        check(
          refreshed.status === 400 && refreshed.body?.error === 'invalid_scope',
          'a refresh granted none of its scopes was not refused',
          () => `#${n}.${r}: ${refreshed.status} ${show(refreshed.body)}`,
        );
        continue;
      }
      snapshots.push(
        await issuedToken({
          label: `#${n}.${r} refresh`,
          response: refreshed,
          decided: rDecided,
          requested,
          ceiling,
          clientId: SPA,
          sub: login,
          claimsGranted: claimsUnder(rDecided.scopes),
        }),
      );
      if (step.audit) await auditedDecisionIs('/token', withClaims(requested), rDecided, `#${n}.${r} refresh`);
      refreshToken = refreshed.body.refresh_token ?? refreshToken;
    }
    return snapshots;
  }

  async function machineStep(step: MachineStep, n: number, trace: string[]): Promise<Snapshot[]> {
    const form: Record<string, string> = {
      grant_type: 'client_credentials',
      resource_types: `urn:inv:seed:${step.marker}`,
    };
    if (step.scopes.length) form.scope = step.scopes.join(' ');
    if (step.resource) form.resource = step.resource;
    if (step.details.length) form.authorization_details = show(step.details);
    const decided = decide(tokenSeed(M2M, 'client_credentials', form.resource_types!), step.scopes, step.details);
    trace.push(`#${n} POST /token ${show(form)}`);
    const response = await postForm(server, '/token', form, { Authorization: basic(M2M, m2mSecret) });
    trace.push(`#${n}   ${response.status} ${masked(response.body)}; decision (recomputed) ${show(decided)}`);
    tally(
      `client_credentials${step.resource ? ' with resource' : ''}${step.details.length ? ' with authorization_details' : ''}: ${response.status}`,
    );
    if (step.scopes.length && !step.scopes.some((scope) => decided.scopes.includes(scope)))
      tally('client_credentials: the decision granted none of the requested scopes');
    const snapshot = await issuedToken({
      label: `#${n} client_credentials`,
      response,
      decided,
      requested: step.scopes,
      ceiling: null,
      clientId: M2M,
      sub: null,
    });
    if (step.audit) await auditedDecisionIs('/token', step.scopes, decided, `#${n} client_credentials`);
    return [snapshot];
  }

  async function run(c: Case): Promise<void> {
    const agent = new FetchUserAgent();
    const trace: string[] = [`user ${c.login}`];
    const earlier: Snapshot[] = [];
    try {
      let latest: Snapshot[] = [];
      for (const [n, step] of c.steps.entries()) {
        latest =
          step.kind === 'code' ? await codeStep(agent, c.login, step, n, trace) : await machineStep(step, n, trace);
        // Another sign-in (or token) in the same session takes nothing back from the earlier tokens.
        await unchanged(earlier);
        earlier.push(...latest);
      }
      // Nor do the refreshes after them.
      await unchanged(latest);
    } catch (error) {
      if (error instanceof Error) error.message += `\n    ${trace.join('\n    ')}\n    ${await auditTail()}`;
      throw error;
    }
  }

  it('every requested scope reaches the authorize decision, whether or not an earlier decision granted it', async function () {
    // On this fresh server no decision has granted `read` yet. oidc-provider's checkResource step
    // (filterStatics, before loadExistingGrant) keeps only the scopes it knows when no resource is
    // named, and it knows a scope only once recognizeScopes() has seen a decision grant it.
    const state = 'first-sight';
    await authorize(new FetchUserAgent(), 'erin', { state, scope: 'openid read' }).catch(() => undefined);
    const entry = await lastAudit((item) => item.endpoint.startsWith('/authorize') && item.policyDecision);
    expect(entry.policyInput.request.parameters.state).to.equal(state);
    expect(entry.policyInput.request.scopes, 'input.request.scopes of the authorize decision').to.have.members([
      'openid',
      'read',
    ]);
  });

  /**
   * Makes every scope of the pools known to oidc-provider, which otherwise drops a scope at
   * /authorize (without a resource) until some decision has granted it (see the test above):
   * client_credentials requests whose seeds the test picked so that each scope is granted once.
   */
  async function warmUp(): Promise<void> {
    const missing = new Set(MACHINE_SCOPES);
    for (let i = 0; missing.size && i < 100; i += 1) {
      const marker = `urn:inv:warm-up:${i}`;
      const granted = decide(tokenSeed(M2M, 'client_credentials', marker), MACHINE_SCOPES, []).scopes;
      if (!granted.some((scope) => missing.has(scope))) continue;
      const { status, body } = await clientCredentials(server, M2M, m2mSecret, {
        scope: MACHINE_SCOPES.join(' '),
        resource_types: marker,
      });
      expect(status, show(body)).to.equal(200);
      for (const scope of words(body.scope)) missing.delete(scope);
    }
    expect([...missing], 'scopes never granted while warming up').to.deep.equal([]);
  }

  it(`holds for ${RUNS} generated sessions (code flow, refresh, client_credentials)`, async function () {
    const found = new Map<string, string>();
    let ran = 0;
    await warmUp();
    const started = Date.now();
    await fc.assert(
      fc.asyncProperty(sessions, async (c) => {
        ran += 1;
        try {
          await run(c);
        } catch (error) {
          if (!SURVEY || !(error instanceof Violation)) throw error;
          if (!found.has(error.kind)) found.set(error.kind, `${error.message}\n    case ${show(c)}`);
        }
      }),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) },
    );
    if (process.env.FUZZ_STATS || SURVEY) {
      // FUZZ_STATS=1 shows how far the generated sessions went (refused, narrowed, refreshed…).
      console.log(`      ${ran} cases in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      for (const [what, count] of [...tallies].sort(([a], [b]) => a.localeCompare(b)))
        console.log(`        ${String(count).padStart(5)}  ${what}`);
    }
    if (found.size) throw new Error(`${found.size} kinds of violation:\n\n${[...found.values()].join('\n\n')}`);
  });
});
