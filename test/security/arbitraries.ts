import fc from 'fast-check';

/**
 * Generators for the hostile-input suite (adversarial.test.ts). Every generator mixes values
 * that look valid — real client ids, registered redirect URIs, live codes and tokens — with
 * hostile ones, so that a request gets past the server's first check often enough to reach
 * the code behind it.
 */

/** Values the suite set up on its server before generating anything. */
export interface Fixtures {
  issuer: string;
  /** Tenants that exist (the default tenant is the absence of the header). */
  knownTenants: string[];
  confidential: { clientId: string; secret: string; tenant?: string }[];
  /** A client that authenticates with client_secret_post only. */
  postClient: { clientId: string; secret: string };
  publicClients: [string, ...string[]];
  jwtClient: string;
  /** A public client's, then a confidential one's. */
  redirectUris: [string, string, ...string[]];
  scopes: string[];
  resources: string[];
  typeUris: string[];
  rarTypes: string[];
  codes: string[];
  codeVerifiers: string[];
  accessTokens: string[];
  refreshTokens: string[];
  idTokens: string[];
  /** Access tokens that may call /introspect (scope introspection). */
  callerTokens: string[];
  dpopProofs: string[];
  idpIds: string[];
  /** Internal ids of existing Admin records, for reference fields. */
  recordIds: number[];
  /** Per Admin collection path, keys of records the suite may overwrite with PUT. */
  victims: Record<string, string[]>;
  /** Names of the audit log's sortable fields. */
  auditSortFields: string[];
}

// ---------------------------------------------------------------------------------------------
// Hostile text

/** Whole values that have broken parsers, lookups and templates before. */
export const HOSTILE_VALUES = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '%00',
  '%zz',
  '%',
  '%%41',
  '%E0%A4%A',
  '%C0%AF',
  '%u0041',
  '\uFFFD',
  '\uD800',
  'a\uDC00b',
  '\u202Eevil',
  '\u00e9t\u00e9',
  '\u0130',
  '\u{1F600}',
  '\u{10FFFF}',
  "' OR '1'='1",
  '"; DROP TABLE clients; --',
  '{"$gt":""}',
  '{"$ne":null}',
  '$where',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  '<script>alert(1)</script>',
  '"><img src=x onerror=alert(1)>',
  '${7*7}',
  '{{7*7}}',
  'null',
  'undefined',
  'true',
  'false',
  'NaN',
  'Infinity',
  '-Infinity',
  '-0',
  '0',
  '-1',
  '1e309',
  '-1e309',
  '1e-400',
  '9007199254740993',
  '18446744073709551616',
  '0x10',
  '1.5',
  '[]',
  '{}',
  '[{}]',
  '[null]',
  '{"type":1}',
  '[{"type":null}]',
  '[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]',
  'http://',
  'https://',
  'https://a#b',
  'urn:',
  'javascript:alert(1)',
  'data:text/html,x',
  'file:///etc/passwd',
  'http://[::1',
  'http://127.0.0.1:1/x',
  'https://127.0.0.1:1/cb',
  'http://user:pass@127.0.0.1:1/',
  '../../../../etc/passwd',
  '..%2f..%2f..%2fetc%2fpasswd',
  '/.',
  '\\',
  '\r\n',
  'a\r\nSet-Cookie: x=y',
  '\t',
  ' openid ',
  'openid  profile',
  ',',
  ',,',
  'a,,b',
  '&',
  '=',
  '+',
  '#',
  '?',
  ';',
  'a=b&c=d',
];

/** Pieces glued together into new hostile values. */
const PIECES = [
  '%',
  '%zz',
  '%2',
  '%00',
  '%25',
  '%2F',
  '%0A',
  '&',
  '=',
  '+',
  '\u0000',
  '\uD800',
  '\u00ff',
  '\u{1F600}',
  '"',
  "'",
  '\\',
  '/',
  '..',
  '{',
  '}',
  '[',
  ']',
  ',',
  ' ',
  'openid',
  'read',
  'urn:x',
  'https://',
  '$',
  '#',
  ':',
  '@',
];

export const numberText: fc.Arbitrary<string> = fc.oneof(
  fc.integer().map(String),
  fc.double().map(String),
  fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }).map(String),
  fc.constantFrom(
    '1e309',
    '-1e309',
    '0x1F',
    '1_000',
    '01',
    '+1',
    '.5',
    '5.',
    '1e-400',
    '2147483648',
    '-2147483649',
    '9223372036854775808',
    '4294967296',
  ),
);

/** Any hostile text, short enough for a query string. */
export const hostileText: fc.Arbitrary<string> = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...HOSTILE_VALUES) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 16 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 24 }) },
  {
    weight: 2,
    arbitrary: fc.array(fc.constantFrom(...PIECES), { minLength: 1, maxLength: 5 }).map((parts) => parts.join('')),
  },
  { weight: 1, arbitrary: numberText },
  { weight: 1, arbitrary: fc.constantFrom(300, 2100, 5000).map((length) => 'A'.repeat(length)) },
);

/** Valid-looking most of the time, hostile the rest. */
export function mixed(valid: fc.Arbitrary<string>, validWeight = 4): fc.Arbitrary<string> {
  return fc.oneof({ weight: validWeight, arbitrary: valid }, { weight: 1, arbitrary: hostileText });
}

/**
 * The required names, plus a few of the optional ones: real requests carry few parameters, and
 * a request with every parameter hostile stops at the first check.
 */
export function someOf<T>(
  spec: Record<string, fc.Arbitrary<T>>,
  required: string[] = [],
  maxOptional = 3,
): fc.Arbitrary<Record<string, T>> {
  const optional = Object.keys(spec).filter((name) => !required.includes(name));
  return fc
    .subarray(optional, { maxLength: Math.min(maxOptional, optional.length) })
    .chain((names) =>
      fc.record(
        Object.fromEntries([...required, ...names].map((name) => [name, spec[name]])) as Record<
          string,
          fc.Arbitrary<T>
        >,
      ),
    );
}

/** Parameter names that are not any endpoint's. */
export const hostileName: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '__proto__',
    'constructor',
    'toString',
    'hasOwnProperty',
    'a[b]',
    'a[]',
    'a.b',
    '',
    ' ',
    '%zz',
    '\u0000',
    'scope\u0000',
    'SCOPE',
    'Client_Id',
    'x'.repeat(200),
    'grant_type ',
    'tenantId',
    'admin',
    'id',
  ),
  fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 12 }),
);

/** A loopback URL nothing listens on, and other URL shapes; never a host off this machine. */
export function urlValue(fx: Fixtures): fc.Arbitrary<string> {
  return fc.oneof(
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        ...fx.redirectUris,
        ...fx.resources,
        `${fx.issuer}/`,
        'https://127.0.0.1:1/cb',
        'http://127.0.0.1:1/cb',
        'http://localhost:1/x',
        'https://[::1]:1/x',
      ),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        'https://127.0.0.1:1/a#frag',
        'https://127.0.0.1:1/a?x=1',
        'HTTPS://127.0.0.1:1/CB',
        'https://127.0.0.1:1/./a/../b',
        'https://127.0.0.1:1/%2e%2e/',
        'urn:ietf:params:x',
        'custom.scheme:/cb',
        'https://user@127.0.0.1:1/',
        'https://127.0.0.1:99999/',
        'https://127.0.0.1:1/\u00e9',
      ),
    },
    { weight: 1, arbitrary: fc.constantFrom(...fx.redirectUris).map((uri) => `${uri}/`) },
    { weight: 2, arbitrary: hostileText },
  );
}

export function scopeValue(fx: Fixtures): fc.Arbitrary<string> {
  const names = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...fx.scopes) },
    { weight: 1, arbitrary: hostileText },
  );
  return fc.oneof(
    { weight: 4, arbitrary: fc.array(names, { maxLength: 4 }).map((scopes) => scopes.join(' ')) },
    { weight: 1, arbitrary: fc.array(names, { maxLength: 4 }).map((scopes) => scopes.join('  ')) },
    { weight: 1, arbitrary: fc.constantFrom(...fx.scopes).map((scope) => `${scope.repeat(2)} ${scope}\t${scope}`) },
  );
}

export function authorizationDetailsValue(fx: Fixtures): fc.Arbitrary<string> {
  const type = mixed(fc.constantFrom(...fx.rarTypes, ...fx.typeUris), 4);
  const entry = fc.oneof(
    fc.record(
      { type, amount: fc.oneof(numberText, fc.constant('10.00')), locations: fc.array(urlValue(fx), { maxLength: 2 }) },
      { requiredKeys: ['type'] },
    ),
    fc.record({ type: fc.jsonValue({ maxDepth: 1 }) }),
    fc.jsonValue({ maxDepth: 2 }),
  );
  return fc.oneof(
    { weight: 3, arbitrary: fc.array(entry, { maxLength: 3 }).map((entries) => JSON.stringify(entries)) },
    { weight: 1, arbitrary: deepJson.map((nested) => nested.text) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.constantFrom(...fx.rarTypes, ...fx.typeUris),
          deepJson.filter((nested) => nested.depth <= 10_000),
        )
        .map(([type, nested]) => `[{"type":${JSON.stringify(type)},"deep":${nested.text}}]`),
    },
    { weight: 2, arbitrary: hostileText },
  );
}

/** A JSON value nested `depth` levels deep (SQLite's JSON functions stop at 1000, OPA's decoder and V8 elsewhere). */
export const deepValue: fc.Arbitrary<unknown> = fc
  .tuple(fc.constantFrom(40, 200, 1100, 3000), fc.boolean())
  .map(([depth, arrays]) => {
    let value: unknown = 1;
    for (let level = 0; level < depth; level++) value = arrays ? [value] : { a: value };
    return value;
  });

/** JSON nested very deep (arrays or objects), as text and a short description. */
export const deepJson: fc.Arbitrary<{ text: string; depth: number }> = fc
  .tuple(fc.constantFrom(64, 1000, 10_000, 100_000), fc.constantFrom('array', 'object'))
  .map(([depth, kind]) => ({
    depth,
    text:
      kind === 'array' ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`,
  }));

// ---------------------------------------------------------------------------------------------
// Parameters: query strings and urlencoded forms

export type Pairs = [string, string][];
export type Encoding = 'standard' | 'percent' | 'raw' | 'mangled';

export const encoding: fc.Arbitrary<Encoding> = fc.constantFrom<Encoding>(
  'standard',
  'standard',
  'percent',
  'raw',
  'mangled',
);

/**
 * Named parameters, each present or not, plus a few unknown ones; names are unique (the
 * repeated-parameter family repeats them on purpose, see `repeatSome`).
 */
export function parameters(
  spec: Record<string, fc.Arbitrary<string>>,
  required: string[] = [],
  maxOptional = 3,
): fc.Arbitrary<Pairs> {
  const extras = fc.oneof(
    { weight: 4, arbitrary: fc.constant<[string, string][]>([]) },
    { weight: 1, arbitrary: fc.array(fc.tuple(hostileName, hostileText), { minLength: 1, maxLength: 2 }) },
  );
  return fc.tuple(someOf(spec, required, maxOptional), extras).map(([known, extra]) => {
    const pairs: Pairs = Object.entries(known).filter(
      (entry): entry is [string, string] => typeof entry[1] === 'string',
    );
    for (const [name, value] of extra) if (!pairs.some(([taken]) => taken === name)) pairs.push([name, value]);
    return pairs;
  });
}

/** The same parameters with one or more names given two to four times, with differing values. */
export function repeatSome(
  pairs: fc.Arbitrary<Pairs>,
  values: fc.Arbitrary<string> = hostileText,
): fc.Arbitrary<Pairs> {
  return fc
    .tuple(
      pairs,
      fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 3 }), fc.array(values, { minLength: 3, maxLength: 3 })), {
        minLength: 1,
        maxLength: 2,
      }),
      fc.boolean(),
    )
    .filter(([base]) => base.length > 0)
    .map(([base, picks, adjacent]) => {
      const result: Pairs = [...base];
      for (const [index, extra, others] of picks) {
        const [name, value] = base[index % base.length]!;
        const copies: Pairs = Array.from({ length: extra }, (_, copy) => [
          name,
          copy === 0 ? value : others[copy - 1]!,
        ]);
        if (adjacent) result.splice(result.findIndex(([taken]) => taken === name) + 1, 0, ...copies);
        else result.push(...copies);
      }
      return result;
    });
}

/** Encodes for a query string or a form body; `raw` and `mangled` produce what no client library would. */
export function encodePairs(pairs: Pairs, how: Encoding, mangle = 0): string {
  switch (how) {
    case 'standard':
      return new URLSearchParams(pairs).toString();
    case 'percent':
      return pairs
        .map(([name, value]) => `${encodeURIComponent(safeForUri(name))}=${encodeURIComponent(safeForUri(value))}`)
        .join('&');
    case 'raw':
      return pairs.map(([name, value]) => `${name}=${value}`).join('&');
    case 'mangled': {
      const text = new URLSearchParams(pairs).toString();
      const junk = ['%zz', '%', '%E0%A4', '&&', '==', '&=', '%00', '+', '%2', ';'][mangle % 10];
      const at = text.length === 0 ? 0 : mangle % (text.length + 1);
      return `${text.slice(0, at)}${junk}${text.slice(at)}`;
    }
  }
}

/** A query string as Node will send it: bytes outside printable ASCII percent-encoded, everything else as generated. */
export function queryPath(path: string, query: string): string {
  const sendable = Array.from(query)
    .map((char) => (/^[\x21-\x7e]$/.test(char) ? char : encodeURIComponent(safeForUri(char))))
    .join('');
  return sendable ? `${path}?${sendable}` : path;
}

/** encodeURIComponent throws on lone surrogates: replace them as a UTF-8 encoder would. */
export function safeForUri(text: string): string {
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

/** A path segment: usually percent-encoded, sometimes raw (then only what Node can send). */
export function pathSegment(value: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc
    .tuple(value, fc.boolean())
    .map(([text, raw]) => (raw ? queryPath('', text).replace(/^\?/, '') : encodeURIComponent(safeForUri(text))));
}

// ---------------------------------------------------------------------------------------------
// Headers

/** What Node lets a header value carry (tab, printable ASCII, bytes 0x80-0xff): UTF-8 goes out as its raw bytes. */
export function headerSafe(value: string): string {
  return Buffer.from(safeForUri(value), 'utf8')
    .toString('latin1')
    .replace(/[^\t\x20-\x7e\x80-\xff]/g, '');
}

export function tenantHeader(fx: Fixtures): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 12, arbitrary: fc.constant(undefined) },
    { weight: 4, arbitrary: fc.constantFrom(...fx.knownTenants) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        'unknown-tenant',
        'default',
        '_default',
        'a'.repeat(64),
        'a'.repeat(65),
        'A-1.b_c',
        '.hidden',
        '-x',
        'x y',
        'fuzz-t, fuzz-t',
        'fuzz-t\t',
      ),
    },
    { weight: 1, arbitrary: hostileText.map(headerSafe) },
  );
}

function base64Of(text: string): string {
  return Buffer.from(safeForUri(text), 'utf8').toString('base64');
}

/** Authorization header values: right and wrong credentials, odd Basic encodings, Bearer garbage. */
export function authorizationHeader(fx: Fixtures): fc.Arbitrary<string | undefined> {
  const client = fc.constantFrom(...fx.confidential, fx.postClient);
  const basic = (id: string, secret: string) =>
    `Basic ${base64Of(`${encodeURIComponent(safeForUri(id))}:${encodeURIComponent(safeForUri(secret))}`)}`;
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant(undefined) },
    { weight: 8, arbitrary: client.map(({ clientId, secret }) => basic(clientId, secret)) },
    { weight: 1, arbitrary: fc.tuple(client, hostileText).map(([{ clientId }, secret]) => basic(clientId, secret)) },
    { weight: 1, arbitrary: fc.tuple(hostileText, hostileText).map(([id, secret]) => basic(id, secret)) },
    {
      weight: 2,
      arbitrary: fc.oneof(
        fc.tuple(hostileText, hostileText).map(([id, secret]) => `Basic ${base64Of(`${id}:${secret}`)}`),
        fc
          .tuple(client, fc.constantFrom(':', '::', '%3A', '%zz', '%', '%00', '\u0000'))
          .map(([{ clientId, secret }, odd]) => `Basic ${base64Of(`${clientId}${odd}${secret}`)}`),
        client.map(({ clientId, secret }) => `Basic ${base64Of(`${clientId}:${secret}`).replace(/=+$/, '')}`),
        client.map(({ clientId, secret }) => `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64url')}`),
        client.map(({ clientId, secret }) => `basic   ${base64Of(`${clientId}:${secret}`)}  `),
        fc.constantFrom(
          'Basic',
          'Basic ',
          'Basic =',
          'Basic ====',
          'Basic !!!!',
          'Basic Og==',
          'Basic OjpfOg==',
          'Basic YQ==',
          'Basic YTo=',
          'Basic OmI=',
          'Basic JXp6OiV6eg==',
          'BASIC YTpi',
          'Basic YTpi YTpi',
        ),
        fc.base64String({ maxLength: 40 }).map((text) => `Basic ${text}`),
        fc.string({ unit: 'binary-ascii', maxLength: 30 }).map((text) => `Basic ${headerSafe(text)}`),
      ),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(...fx.accessTokens, ...fx.callerTokens, ...fx.refreshTokens, ...fx.idTokens)
        .map((token) => `Bearer ${token}`),
    },
    {
      weight: 1,
      arbitrary: fc.oneof(
        fc.constantFrom(
          'Bearer',
          'Bearer ',
          'Bearer  ',
          'bearer x',
          'BEARER x',
          'Bearer a b',
          'Bearer eyJ.eyJ.',
          'Bearer ....',
          'Bearer null',
          'DPoP x',
          'Negotiate x',
          'Digest username="a"',
          'Token x',
          'x',
        ),
        fc.constantFrom(...fx.accessTokens).map((token) => `DPoP ${token}`),
        hostileText.map((text) => headerSafe(`Bearer ${text}`)),
        fc.constantFrom(...fx.accessTokens).map((token) => `Bearer ${token}${token}`),
      ),
    },
  );
}

export function jwtOf(header: unknown, payload: unknown, signature = 'c2ln'): string {
  const part = (value: unknown) =>
    Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
  return `${part(header)}.${part(payload)}.${signature}`;
}

/** DPoP proofs: real ones (single use), structurally odd JWTs and garbage. */
export function dpopHeader(fx: Fixtures): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 14, arbitrary: fc.constant(undefined) },
    { weight: 2, arbitrary: fc.constantFrom(...fx.dpopProofs) },
    {
      weight: 2,
      arbitrary: fc.oneof(
        fc
          .record(
            {
              typ: fc.constantFrom('dpop+jwt', 'JWT', 'x'),
              alg: fc.constantFrom('ES256', 'none', 'HS256', 'RS256', 'x'),
              jwk: fc.oneof(fc.constant({ kty: 'EC', crv: 'P-256', x: 'AA', y: 'AA' }), fc.jsonValue({ maxDepth: 2 })),
            },
            { requiredKeys: [] },
          )
          .chain((header) =>
            fc
              .record(
                {
                  htm: fc.constantFrom('POST', 'GET', 'post'),
                  htu: fc.constantFrom(`${fx.issuer}/token`, `${fx.issuer}/userinfo`, 'x'),
                  iat: fc.oneof(fc.integer(), fc.constant(Math.floor(Date.now() / 1000))),
                  jti: fc.string(),
                },
                { requiredKeys: [] },
              )
              .map((payload) => jwtOf(header, payload)),
          ),
        fc.constantFrom('a.b.c', 'a.b', '...', 'eyJhbGciOiJub25lIn0.e30.', 'eyJ9.eyJ9.', jwtOf('not json', '{}')),
        fc.constantFrom(...fx.dpopProofs).map((proof) => `${proof}x`),
      ),
    },
    { weight: 1, arbitrary: hostileText.map(headerSafe) },
  );
}

export const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 2, arbitrary: fc.constant(undefined) },
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      'application/x-www-form-urlencoded',
      'application/x-www-form-urlencoded; charset=utf-8',
      'application/x-www-form-urlencoded; charset=bogus',
      'application/x-www-form-urlencoded; charset=utf-16le',
      'application/x-www-form-urlencoded;;;',
      'APPLICATION/X-WWW-FORM-URLENCODED',
      'application/json',
      'application/json; charset=utf-7',
      'application/json; charset=latin1',
      'application/merge-patch+json',
      'application/jwt',
      'text/plain',
      'text/html',
      'multipart/form-data; boundary=x',
      'multipart/form-data',
      'application/octet-stream',
      '*/*',
      'application/*',
      '',
      ';',
      'x',
      'application/json, application/x-www-form-urlencoded',
    ),
  },
  { weight: 1, arbitrary: hostileText.map(headerSafe) },
);

export function cookieHeader(): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constant(undefined) },
    {
      weight: 2,
      arbitrary: fc
        .array(
          fc.tuple(
            fc.constantFrom(
              '_session',
              '_session.sig',
              '_session.legacy',
              '_interaction',
              '_interaction.sig',
              '_interaction_resume',
              '_state.x',
              'arbiter',
              '__proto__',
            ),
            hostileText,
          ),
          { minLength: 1, maxLength: 3 },
        )
        .map((cookies) => headerSafe(cookies.map(([name, value]) => `${name}=${value}`).join('; '))),
    },
    { weight: 1, arbitrary: hostileText.map(headerSafe) },
  );
}

// ---------------------------------------------------------------------------------------------
// JSON bodies

type Schema = Record<string, unknown>;

/** Hostile JSON values of any type, for fields whose type they break. */
export const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: hostileText },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      null,
      true,
      false,
      0,
      -1,
      1.5,
      2 ** 53 + 2,
      -(2 ** 63),
      1e300,
      -0,
      [],
      {},
      [null],
      [[]],
      { $gt: '' },
      { $ne: null },
      { __class__: 'x' },
    ),
  },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.array(hostileText, { maxLength: 4 }) },
  { weight: 1, arbitrary: deepValue },
);

/**
 * A JSON value for a field of an Admin collection's schema: one that fits the schema most of
 * the time (so that the record gets past validation to the store and the checks behind it),
 * a value that breaks it otherwise.
 */
export function fromSchema(schema: Schema, fx: Fixtures, field = ''): fc.Arbitrary<unknown> {
  const valid = validForSchema(schema, fx, field);
  return fc.oneof({ weight: 8, arbitrary: valid }, { weight: 1, arbitrary: hostileJson });
}

function validForSchema(schema: Schema, fx: Fixtures, field: string): fc.Arbitrary<unknown> {
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string | undefined];
  const options: fc.Arbitrary<unknown>[] = [];
  for (const type of types) {
    if (type === 'null') options.push(fc.constant(null));
    else if (type === 'boolean') options.push(fc.boolean());
    else if (type === 'integer')
      options.push(
        fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom(...fx.recordIds) },
          { weight: 1, arbitrary: fc.constantFrom(1, 2, 99999, 2 ** 31, 2 ** 53 - 1, 2 ** 53 + 2, 1e20) },
        ),
      );
    else if (type === 'number') options.push(fc.double({ noNaN: true }));
    else if (type === 'array')
      options.push(fc.array(fromSchema((schema.items as Schema) ?? {}, fx, field), { maxLength: 4 }));
    else if (type === 'object') options.push(objectValue(schema, fx));
    else options.push(stringFor(schema, fx, field));
  }
  return options.length === 1 ? options[0]! : fc.oneof(...options);
}

function objectValue(schema: Schema, fx: Fixtures): fc.Arbitrary<unknown> {
  const properties = schema.properties as Record<string, Schema> | undefined;
  const shaped = properties
    ? fc.record(
        Object.fromEntries(Object.entries(properties).map(([name, sub]) => [name, fromSchema(sub, fx, name)])),
        { requiredKeys: [] },
      )
    : fc.constant({});
  return fc.oneof(
    shaped,
    fc.dictionary(
      fc.oneof(
        fc.constantFrom('keys', 'granted_resources', 'kty', 'type', 'scopes', 'a', '__proto__', 'constructor'),
        fc.string({ maxLength: 6 }),
      ),
      fc.jsonValue({ maxDepth: 3 }),
      { maxKeys: 4 },
    ),
    fc.constant({
      keys: [{ kty: 'EC', crv: 'P-256', x: 'AA', y: 'AA', kid: 'k' }, { kty: 'RSA', n: 'AQAB', e: 'AQAB' }, {}],
    }),
    fc.constant({ granted_resources: [{ type: 'urn:as:introspect', scopes: ['introspection'] }, { type: 7 }, null] }),
    deepValue.map((deep) => ({
      granted_resources: [{ type: 'urn:as:introspect', scopes: ['introspection'], deep }],
      keys: [],
      deep,
    })),
  );
}

const REGO_OK = (name: string) => `package arbiter.fuzz_${name}\n\nimport rego.v1\n\nok := true\n`;

function stringFor(schema: Schema, fx: Fixtures, field: string): fc.Arbitrary<string> {
  const format = schema.format as string | undefined;
  const pattern = typeof schema.pattern === 'string' ? schema.pattern : undefined;
  if (format === 'bcrypt') {
    return fc.constantFrom(
      '$2a$04$abcdefghijklmnopqrstuuAbCdEfGhIjKlMnOpQrStUvWxYz01234',
      '$2b$04$' + '.'.repeat(53),
      '$2y$10$' + 'A'.repeat(53),
      '$2a$04$short',
      'plain-secret',
      '$1$md5$hash',
    );
  }
  if (format === 'uri' || pattern === '^https://') return urlValue(fx);
  switch (field) {
    case 'tenantId':
      return fc.constantFrom(...fx.knownTenants, 'unknown-tenant', 'a'.repeat(64), 'fresh-tenant-1');
    case 'path':
      return fc.constantFrom(
        'fuzz/a.rego',
        'fuzz/b/c.rego',
        'fuzz/x.cedar',
        'fuzz/../arbiter/token.rego',
        './fuzz.rego',
        'fuzz//a.rego',
        'fuzz/a.rego/',
        'a'.repeat(256),
        '_x',
      );
    case 'content':
      return fc.constantFrom(
        REGO_OK('a'),
        REGO_OK('b'),
        'package arbiter.fuzz_c\n\nok if {',
        'package fuzz.outside\n\nok := true\n',
        'forbid (principal, action, resource) when { false };',
        'permit (principal, action, resource) when {',
        '\u0000',
        'package arbiter.token\n\nimport rego.v1\n\ndecision := 1\n',
      );
    case 'kind':
      return fc.constantFrom('rego', 'cedar');
    case 'dataKey':
      return fc.constantFrom('fuzz_a', 'fuzz_b.c', 'fuzz_victim', 'fuzz_' + 'x'.repeat(250), 'Fuzz', '_fuzz');
    case 'payload':
      return fc.oneof(
        fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
        fc.constantFrom('{', 'NaN', '1e400', '"\\ud800"', '{"a":1,"a":2}', ' {} '),
        deepJson.map((nested) => nested.text),
      );
    case 'version':
      return fc.constantFrom('v1', 'draft', 'fuzz-v', '');
    case 'idpId':
      return fc.constantFrom(...fx.idpIds, 'fuzz-idp-new', 'a.b~c-d_e', 'x'.repeat(128));
    case 'clientId':
      return fc.constantFrom(
        ...fx.publicClients,
        'fuzz-new-client',
        'fuzz-new-client-2',
        'https://127.0.0.1:1/cimd.json',
      );
    case 'typeUri':
      return fc.constantFrom(...fx.typeUris, 'urn:fuzz:new-type');
    case 'subjectId':
      return fc.constantFrom('alice', 'fuzz-subject', 'fuzz-new-subject');
    case 'email':
      return fc.constantFrom('a@example.test', 'not-an-email');
    default:
      return fc.oneof(
        fc.string({ unit: 'grapheme', maxLength: 12 }),
        fc.constantFrom(...fx.scopes, ...fx.typeUris, 'read', 'write'),
      );
  }
}

/** A body for an Admin collection: the schema's fields (required ones usually present), sometimes unknown fields too. */
export function adminBody(schema: Schema, fx: Fixtures): fc.Arbitrary<Record<string, unknown>> {
  const properties = (schema.properties as Record<string, Schema>) ?? {};
  const required = (schema.required as string[]) ?? [];
  const fields = Object.fromEntries(Object.entries(properties).map(([name, sub]) => [name, fromSchema(sub, fx, name)]));
  return fc
    .tuple(
      fc.oneof({ weight: 4, arbitrary: someOf(fields, required, 4) }, { weight: 1, arbitrary: someOf(fields, [], 3) }),
      fc.oneof(
        { weight: 4, arbitrary: fc.constant({}) },
        {
          weight: 1,
          arbitrary: fc.dictionary(
            fc.oneof(hostileName, fc.constantFrom('id', 'createdAt', 'updatedAt', 'clientSecretHash', 'secret')),
            hostileJson,
            { maxKeys: 2 },
          ),
        },
      ),
    )
    .map(([known, extra]) => ({ ...extra, ...known }) as Record<string, unknown>);
}

/** JSON text for a body: usually JSON.stringify, otherwise broken or odd on purpose. */
export function jsonText(value: fc.Arbitrary<unknown>): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 8, arbitrary: value.map((body) => JSON.stringify(body) ?? 'null') },
    {
      weight: 1,
      arbitrary: fc.tuple(value, fc.nat()).map(([body, cut]) => {
        const text = JSON.stringify(body) ?? '';
        return text.slice(0, cut % (text.length + 1));
      }),
    },
    {
      weight: 1,
      arbitrary: value.map((body) =>
        (JSON.stringify(body) ?? '{}')
          .replace(/^\{/, '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},')
          .replace(/,}$/, '}'),
      ),
    },
    { weight: 1, arbitrary: value.map((body) => `\uFEFF${JSON.stringify(body)}`) },
    { weight: 1, arbitrary: malformedJson },
  );
}

export const malformedJson: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '{',
    '}',
    '{"a":',
    '{"a":1,}',
    "{'a':1}",
    '{a:1}',
    '[1,2',
    'NaN',
    'undefined',
    '{"a":NaN}',
    '{"a":1e400}',
    '{"a":-1e400}',
    '{"a":123456789012345678901234567890}',
    '{"a":"\\ud800"}',
    '{"a":"\\u0000"}',
    '{"a":"\u0000"}',
    '{"a":1}{"b":2}',
    '{"a":1} x',
    '/* c */{}',
    '{"a":1,"a":2}',
    'null',
    'true',
    '"string"',
    '42',
    '[]',
    '\u0000',
    '\uFEFF{}',
    '{"__proto__":[]}',
  ),
  deepJson.map((nested) => nested.text),
  fc.string({ unit: 'binary', maxLength: 40 }),
);

/** Bodies that break form parsers. */
export const malformedForm: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '%zz',
    '%',
    'a=%',
    'a=%E0%A4%A',
    'grant_type=%zz',
    'grant_type=client_credentials&%zz',
    '&&&',
    '=',
    '==',
    '=x',
    'a==b',
    '\u0000=\u0000',
    'grant_type',
    'grant_type=',
    'token=',
    'a[b]=1&a[c]=2',
    'a[]=1&a[]=2',
    '__proto__=x&constructor=y',
    'grant_type=client_credentials;scope=read',
    '\uFEFFgrant_type=client_credentials',
  ),
  fc.string({ unit: 'binary', maxLength: 60 }),
);
