import { createHash, X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import ipaddr from 'ipaddr.js';
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { Config } from '../../config/index.js';
import { cameThroughTrustedProxy } from '../../http/forwarded.js';
import { clientCaCertificates } from '../../http/tls.js';
import { CLIENT_AUTH_METHODS } from '../clients/auth-method.js';
import type { ConfigurationSlice } from '../context.js';

export type MtlsSettings = Pick<Config, 'tlsCertFile' | 'tlsClientCaFile' | 'mtlsCertificateHeader'>;

/** A client certificate a request came with, and whether a CA of TLS_CLIENT_CA_FILE issued it. */
export interface PresentedCertificate {
  certificate: X509Certificate;
  authorized: boolean;
}

/**
 * RFC 8705 mutual TLS is on where client certificates can be seen: Arbiter's own TLS listener
 * (TLS_CERT_FILE) or a TLS-terminating proxy forwarding them (MTLS_CERTIFICATE_HEADER).
 */
export function mtlsEnabled(config: MtlsSettings): boolean {
  return Boolean(config.tlsCertFile || config.mtlsCertificateHeader);
}

/**
 * Where a request's client certificate comes from: from a trusted proxy with MTLS_CERTIFICATE_HEADER
 * set, that header alone (src/http/forwarded.ts removes it from every other peer's requests before
 * this reads it); else the TLS connection itself. Read once per request. Found 2026-11-30: the
 * connection's certificate came first, so a proxy that re-encrypts to Arbiter with a certificate
 * of its own (nginx `proxy_ssl_certificate`, a service mesh) had every token bound to, and every
 * tls_client_auth checked against, the proxy's certificate, which anyone behind it presents.
 */
export class ClientCertificates {
  private readonly seen = new WeakMap<IncomingMessage, PresentedCertificate | null>();
  private readonly cas: X509Certificate[];

  constructor(private readonly settings: MtlsSettings) {
    this.cas = clientCaCertificates(settings);
  }

  /** Whether tls_client_auth can be offered: some CA is trusted to issue clients' certificates. */
  get issuing(): boolean {
    return this.cas.length > 0;
  }

  presented(request: IncomingMessage): PresentedCertificate | null {
    let presented = this.seen.get(request);
    if (presented === undefined) {
      presented =
        this.settings.mtlsCertificateHeader && cameThroughTrustedProxy(request)
          ? this.fromProxy(request)
          : this.fromConnection(request);
      this.seen.set(request, presented);
    }
    return presented;
  }

  private fromConnection(request: IncomingMessage): PresentedCertificate | null {
    const socket = request.socket as Partial<TLSSocket>;
    if (!socket.encrypted || !socket.getPeerX509Certificate) return null;
    const certificate = socket.getPeerX509Certificate();
    // The listener's `ca` is TLS_CLIENT_CA_FILE alone (src/http/tls.ts): `authorized` means one of them issued it.
    return certificate ? { certificate, authorized: socket.authorized === true } : null;
  }

  private fromProxy(request: IncomingMessage): PresentedCertificate | null {
    const header = this.settings.mtlsCertificateHeader;
    const value = header ? request.headers[header] : undefined;
    if (typeof value !== 'string' || !value) return null;
    const certificate = parseForwardedCertificate(value);
    return certificate ? { certificate, authorized: this.issuedByTrustedCa(certificate) } : null;
  }

  /** The proxy may not check against the same CAs: its certificate is checked here as the TLS listener checks one. */
  private issuedByTrustedCa(certificate: X509Certificate): boolean {
    const now = Date.now();
    if (now < Date.parse(certificate.validFrom) || now > Date.parse(certificate.validTo)) return false;
    return this.cas.some((ca) => certificate.checkIssued(ca) && certificate.verify(ca.publicKey));
  }
}

/**
 * A certificate as proxies forward one: PEM (nginx `$ssl_client_cert`, with its newlines or with
 * spaces for them), URL-encoded PEM (nginx `$ssl_client_escaped_cert`, AWS ALB, Traefik), or
 * base64 DER. Anything else is no certificate.
 */
export function parseForwardedCertificate(value: string): X509Certificate | null {
  try {
    const text = value.includes('%') ? decodeURIComponent(value) : value;
    const body = text.replace(/-----(BEGIN|END) CERTIFICATE-----/g, '').replace(/\s+/g, '');
    return new X509Certificate(Buffer.from(body, 'base64'));
  } catch {
    return null;
  }
}

/** RFC 8705 §3.1: the `x5t#S256` confirmation of a certificate, the base64url SHA-256 of its DER. */
export function certificateThumbprint(certificate: X509Certificate): string {
  return createHash('sha256').update(certificate.raw).digest('base64url');
}

/** One ClientCertificates per configuration (the CA file read once, whatever the tenants). */
const perConfig = new WeakMap<MtlsSettings, ClientCertificates>();

export function clientCertificatesOf(config: MtlsSettings): ClientCertificates {
  let certificates = perConfig.get(config);
  if (!certificates) {
    certificates = new ClientCertificates(config);
    perConfig.set(config, certificates);
  }
  return certificates;
}

/**
 * A certificate-bound token (`x5t#S256`) presented at one of Arbiter's own APIs: whether the
 * request came with that very certificate (RFC 8705 §3: otherwise the token is worthless).
 */
export function holdsBoundCertificate(
  config: MtlsSettings,
  request: IncomingMessage,
  token: { 'x5t#S256'?: unknown },
): boolean {
  const bound = token['x5t#S256'];
  if (typeof bound !== 'string') return true;
  const presented = mtlsEnabled(config) ? clientCertificatesOf(config).presented(request) : null;
  return presented !== null && certificateThumbprint(presented.certificate) === bound;
}

/** RFC 8705 §2's client authentication methods. */
export const MTLS_AUTH_METHODS: readonly string[] = ['tls_client_auth', 'self_signed_tls_client_auth'];

/**
 * The RFC 8705 methods offered: none without mutual TLS, `tls_client_auth` only where a CA of
 * TLS_CLIENT_CA_FILE issues clients' certificates.
 */
export function mtlsAuthMethods(config: MtlsSettings): string[] {
  if (!mtlsEnabled(config)) return [];
  return clientCertificatesOf(config).issuing ? [...MTLS_AUTH_METHODS] : ['self_signed_tls_client_auth'];
}

/**
 * Whether a client registered for `method` can authenticate on this server: every method but an
 * RFC 8705 one this configuration does not offer. A client that cannot does not exist for the
 * protocol (`invalid_client` at /token: RFC 6749 §5.2, an unsupported authentication method),
 * and registration refuses the method (`invalid_client_metadata`: RFC 7591 §3.2.2).
 */
export function authMethodOffered(config: MtlsSettings): (method: string | undefined) => boolean {
  const offered = new Set(mtlsAuthMethods(config));
  return (method) => method === undefined || !MTLS_AUTH_METHODS.includes(method) || offered.has(method);
}

/** RFC 8705 §2.1.2 and §3.4's client metadata: what a client registers for mutual TLS. */
const MTLS_MEMBERS = [
  'tls_client_auth_subject_dn',
  'tls_client_auth_san_dns',
  'tls_client_auth_san_uri',
  'tls_client_auth_san_ip',
  'tls_client_auth_san_email',
  'tls_client_certificate_bound_access_tokens',
] as const;

/**
 * The first RFC 8705 member of registered metadata that this configuration cannot honour: any
 * of them given (certificate-bound tokens asked for) while mutual TLS is off, where no client
 * certificate is ever seen. Undefined when there is none.
 */
export function unofferedMtlsMember(
  config: MtlsSettings,
  metadata: Readonly<Partial<Record<(typeof MTLS_MEMBERS)[number], unknown>>>,
): string | undefined {
  if (mtlsEnabled(config)) return undefined;
  return MTLS_MEMBERS.find((member) => metadata[member] !== undefined && metadata[member] !== false);
}

/**
 * RFC 8705 §5: the endpoints where a client authenticates or presents a certificate-bound token,
 * each also under the mTLS alias base, which stands in for ISSUER (a path tenant's path kept).
 */
const ALIASED_ENDPOINTS = [
  'token_endpoint',
  'revocation_endpoint',
  'introspection_endpoint',
  'userinfo_endpoint',
  'pushed_authorization_request_endpoint',
  'device_authorization_endpoint',
];

/** `mtls_endpoint_aliases` of a discovery document whose endpoints are under `issuer` (MTLS_ENDPOINT_BASE_URL). */
export function mtlsEndpointAliases(
  document: Readonly<Record<string, unknown>>,
  issuer: string,
  aliasBase: string,
): Record<string, string> {
  const aliases: Record<string, string> = {};
  for (const field of ALIASED_ENDPOINTS) {
    const url = document[field];
    if (typeof url === 'string' && url.startsWith(issuer)) aliases[field] = `${aliasBase}${url.slice(issuer.length)}`;
  }
  return aliases;
}

/**
 * oidc-provider's own RFC 8705 (features.mTLS) where mutual TLS is on: tls_client_auth (where a
 * client CA is configured) and self_signed_tls_client_auth at every endpoint that authenticates
 * clients, certificate-bound access tokens for clients registered for them (checked by
 * oidc-provider at UserInfo; introspection shows `cnf.x5t#S256`). One set of endpoints serves
 * both kinds of clients: the listener asks for a certificate and requires none; a host that
 * requires one may be advertised as `mtls_endpoint_aliases` (MTLS_ENDPOINT_BASE_URL, discovery.ts).
 */
export const mutualTls: ConfigurationSlice = ({ config }) => {
  if (!mtlsEnabled(config)) return {};
  const certificates = clientCertificatesOf(config);
  const presented = (ctx: KoaContextWithOIDC) => certificates.presented(ctx.req);
  return {
    clientAuthMethods: [...CLIENT_AUTH_METHODS, ...mtlsAuthMethods(config)],
    features: {
      mTLS: {
        enabled: true,
        certificateBoundAccessTokens: true,
        selfSignedTlsClientAuth: true,
        tlsClientAuth: certificates.issuing,
        getCertificate: (ctx: KoaContextWithOIDC) => presented(ctx)?.certificate,
        certificateAuthorized: (ctx: KoaContextWithOIDC) => presented(ctx)?.authorized === true,
        certificateSubjectMatches: (ctx: KoaContextWithOIDC, property: string, expected: string) => {
          const certificate = presented(ctx)?.certificate;
          return certificate ? subjectMatches(certificate, property, expected) : false;
        },
      },
    },
  } as ReturnType<ConfigurationSlice>;
};

/**
 * RFC 8705 §2.1.2: whether the certificate carries the registered subject value: the subject DN
 * (RFC 4514 string, compared attribute by attribute whatever their order), or a SAN of the
 * registered kind equal to the value (DNS names and e-mail addresses case-insensitively, IP
 * addresses however written).
 */
export function subjectMatches(certificate: X509Certificate, property: string, expected: string): boolean {
  switch (property) {
    case 'tls_client_auth_subject_dn':
      return sameNames(distinguishedName(certificate.subject.split('\n')), distinguishedName(splitRfc4514(expected)));
    case 'tls_client_auth_san_dns':
      return alternativeNames(certificate, 'DNS').some((name) => name.toLowerCase() === expected.toLowerCase());
    case 'tls_client_auth_san_email':
      return alternativeNames(certificate, 'email').some((name) => name.toLowerCase() === expected.toLowerCase());
    case 'tls_client_auth_san_uri':
      return alternativeNames(certificate, 'URI').includes(expected);
    case 'tls_client_auth_san_ip':
      return alternativeNames(certificate, 'IP Address').some((address) => sameAddress(address, expected));
    default:
      return false;
  }
}

/** `CN=client,O=Example\, Inc.` → its attributes, escaped commas kept within values. */
function splitRfc4514(dn: string): string[] {
  return dn.split(/(?<!\\),/);
}

/**
 * Attributes as `TYPE=value`, escapes undone (Node writes `O=Example\, Inc.` as RFC 4514 does),
 * the type upper-cased and both sides trimmed, in one order.
 */
function distinguishedName(attributes: string[]): string[] {
  return attributes
    .map((escaped) => escaped.replace(/\\(.)/g, '$1'))
    .map((attribute) => {
      const equals = attribute.indexOf('=');
      return equals < 0
        ? attribute.trim()
        : `${attribute.slice(0, equals).trim().toUpperCase()}=${attribute.slice(equals + 1).trim()}`;
    })
    .filter(Boolean)
    .sort();
}

function sameNames(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((name, index) => name === b[index]);
}

/** The certificate's SANs of one kind, from Node's `DNS:a.example, IP Address:10.0.0.1` rendering. */
function alternativeNames(certificate: X509Certificate, kind: string): string[] {
  const names = certificate.subjectAltName;
  if (!names) return [];
  return names
    .split(/, (?=[A-Za-z ]+:)/)
    .filter((entry) => entry.startsWith(`${kind}:`))
    .map((entry) => entry.slice(kind.length + 1).replace(/^"(.*)"$/, '$1'));
}

function sameAddress(a: string, b: string): boolean {
  if (!ipaddr.isValid(a) || !ipaddr.isValid(b)) return false;
  return ipaddr.process(a).toNormalizedString() === ipaddr.process(b).toNormalizedString();
}
