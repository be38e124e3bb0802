import { expect } from 'chai';
import { ConfigError, configWarnings, ENVIRONMENT, loadConfig, type Config } from '../../../src/config/index.js';

/** The smallest environment a configuration loads from (the defaults file has the rest). */
const BASE = { STORE_URL: 'sqlite::memory:' };
const load = (env: Record<string, string> = {}) => loadConfig({ ...BASE, ...env });
const problemWith = (env: Record<string, string>): string => {
  try {
    load(env);
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`expected ${JSON.stringify(env)} to be refused`);
};
const SECRET_KEY = 'A'.repeat(43);

describe('unit: configuration from the environment (config/index loadConfig)', function () {
  describe('how values are read', function () {
    it('reads integers, booleans, numbers, lists and strings as the schema types them', function () {
      const config = load({
        PORT: '8443',
        ACCESS_LOG: 'TRUE',
        POLICY_SHADOW_SAMPLE_RATE: '0.25',
        TRUSTED_PROXIES: ' 10.0.0.0/8 , ::1,, ',
        OTEL_SERVICE_NAME: 'arbiter-unit',
      });
      expect(config).to.include({
        port: 8443,
        accessLog: true,
        policyShadowSampleRate: 0.25,
        serviceName: 'arbiter-unit',
      });
      expect(config.trustedProxies).to.deep.equal(['10.0.0.0/8', '::1']);
    });

    it('ignores an empty variable (the default stays)', function () {
      expect(load({ PORT: '' }).port).to.equal(load().port);
    });

    it('puts each lifetime variable under ttl', function () {
      const { ttl } = load({ ACCESS_TOKEN_TTL_SECONDS: '90', UMA_TICKET_TTL_SECONDS: '30' });
      expect(ttl).to.include({ accessTokenSeconds: 90, permissionTicketSeconds: 30 });
    });

    it('derives the issuer from the port when ISSUER is not set', function () {
      expect(load({ PORT: '7001' }).issuer).to.equal('http://localhost:7001');
    });

    it('generates a bootstrap admin key and a bundle token when none is given, and says the key was generated', function () {
      const config = load();
      expect(config.adminApiKeyGenerated).to.equal(true);
      expect(config.adminApiKey).to.have.length.of.at.least(32);
      expect(config.policyBundleToken).to.have.length.of.at.least(32);
      expect(load().adminApiKey, 'a new one each time').to.not.equal(config.adminApiKey);
    });

    it('keeps a given admin key and says it was not generated', function () {
      const config = load({ SERVICE_ADMIN_API_KEY: 'k'.repeat(16) });
      expect(config).to.include({ adminApiKey: 'k'.repeat(16), adminApiKeyGenerated: false });
    });

    it('decides Rego in process by default with a managed OPA, and not with an external one', function () {
      expect(load().policyRegoInProcess).to.equal(true);
      expect(load({ OPA_URL: 'http://opa.internal:8181' }).policyRegoInProcess).to.equal(false);
      expect(
        load({ OPA_URL: 'http://opa.internal:8181', POLICY_REGO_IN_PROCESS: 'true' }).policyRegoInProcess,
      ).to.equal(true);
    });

    it('allows insecure loopback outbound calls by default outside production only', function () {
      expect(load().outboundAllowInsecureLoopback).to.equal(true);
      const production = load({
        NODE_ENV: 'production',
        SERVICE_ADMIN_API_KEY: 'k'.repeat(16),
        SERVICE_SECRETS_KEY: SECRET_KEY,
      });
      expect(production.outboundAllowInsecureLoopback).to.equal(false);
      expect(production.production).to.equal(true);
    });

    it('has no admin listener by default, and binds one to 127.0.0.1 unless told otherwise', function () {
      expect(load()).to.include({ adminPort: null, adminBindAddress: null });
      expect(load({ ADMIN_PORT: '9100' })).to.include({ adminPort: 9100, adminBindAddress: '127.0.0.1' });
      expect(load({ ADMIN_PORT: '9100', ADMIN_BIND_ADDRESS: '::' }).adminBindAddress).to.equal('::');
    });

    it('derives the OTLP traces URL from the base endpoint, once, whatever its trailing slashes', function () {
      expect(load({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318//' }).otlpTracesEndpoint).to.equal(
        'http://collector:4318/v1/traces',
      );
    });

    it("takes the traces endpoint as given over the base endpoint's", function () {
      const config = load({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:4318/custom',
      });
      expect(config.otlpTracesEndpoint).to.equal('http://traces:4318/custom');
    });

    it('has tracing off without an endpoint', function () {
      expect(load().otlpTracesEndpoint).to.equal(null);
    });

    it('maps every variable to a distinct setting', function () {
      const keys = Object.values(ENVIRONMENT);
      expect(new Set(keys).size).to.equal(keys.length);
    });
  });

  describe('what is refused, naming the variable', function () {
    const refused: [string, Record<string, string>, RegExp][] = [
      ['a port that is not an integer', { PORT: '80a' }, /PORT must be an integer/],
      ['a port above 65535', { PORT: '70000' }, /PORT must be <= 65535/],
      ['a negative port', { PORT: '-1' }, /PORT must be >= 0/],
      ['a boolean that is not true or false', { ACCESS_LOG: 'yes' }, /ACCESS_LOG must be true or false/],
      ['a number that is not one', { POLICY_SHADOW_SAMPLE_RATE: '1e-3' }, /POLICY_SHADOW_SAMPLE_RATE must be a number/],
      ['a sample rate above 1', { POLICY_SHADOW_SAMPLE_RATE: '1.5' }, /POLICY_SHADOW_SAMPLE_RATE must be <= 1/],
      ['a replay share of 0', { POLICY_REPLAY_SHARE: '0' }, /POLICY_REPLAY_SHARE must be > 0/],
      [
        'an issuer with a trailing slash',
        { ISSUER: 'https://as.example.test/' },
        /ISSUER must be an http:\/\/ or https:\/\/ URL/,
      ],
      ['an issuer with a query', { ISSUER: 'https://as.example.test?x=1' }, /ISSUER must be/],
      ['an issuer that is not http(s)', { ISSUER: 'ftp://as.example.test' }, /ISSUER must be/],
      ['an unknown store', { STORE_URL: 'mysql://db' }, /STORE_URL must be sqlite:<file>/],
      ['an OPA URL that is not http(s)', { OPA_URL: 'opa:8181' }, /OPA_URL must be an http:\/\/ or https:\/\/ URL/],
      ['a short OPA token', { OPA_TOKEN: 'short' }, /OPA_TOKEN must NOT have fewer than 16 characters/],
      [
        'an OPA health check more often than every 200 ms',
        { OPA_HEALTH_CHECK_INTERVAL_MS: '50' },
        /OPA_HEALTH_CHECK_INTERVAL_MS must be >= 200/,
      ],
      [
        'a CIMD negative cache of 0 s',
        { SERVICE_REGISTRATION_CIMD_NEGATIVE_CACHE_SECONDS: '0' },
        /SERVICE_REGISTRATION_CIMD_NEGATIVE_CACHE_SECONDS must be >= 1/,
      ],
      ['a short admin key', { SERVICE_ADMIN_API_KEY: 'short' }, /SERVICE_ADMIN_API_KEY must NOT have fewer than 16/],
      ['a short metrics token', { METRICS_TOKEN: 'short' }, /METRICS_TOKEN must NOT have fewer than 16/],
      [
        'an unknown log level',
        { LOG_LEVEL: 'verbose' },
        /LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent/,
      ],
      [
        'a proxy that is no address',
        { TRUSTED_PROXIES: '10.0.0.1,proxy.local' },
        /TRUSTED_PROXIES item 2 \("proxy.local"\) must be an IP address or a CIDR range/,
      ],
      ['a tenant name with a slash', { TENANTS: 'acme,a/b' }, /TENANTS item 2 \("a\/b"\) must be 1 to 64 letters/],
      [
        'a secrets key of the wrong length',
        { SERVICE_SECRETS_KEY: 'A'.repeat(42) },
        /SERVICE_SECRETS_KEY must be 32 random bytes in base64url/,
      ],
      [
        'an authorization code living over 10 minutes',
        { AUTHORIZATION_CODE_TTL_SECONDS: '601' },
        /AUTHORIZATION_CODE_TTL_SECONDS must be <= 600/,
      ],
      ['a lifetime of 0', { ACCESS_TOKEN_TTL_SECONDS: '0' }, /ACCESS_TOKEN_TTL_SECONDS must be >= 1/],
      [
        'a sandbox timeout under 100 ms',
        { POLICY_SANDBOX_TIMEOUT_MS: '99' },
        /POLICY_SANDBOX_TIMEOUT_MS must be >= 100/,
      ],
      ['an OPA memory limit under 32 MB', { POLICY_OPA_MEMORY_MB: '16' }, /POLICY_OPA_MEMORY_MB must be >= 32/],
      ['65 OPA connections', { POLICY_OPA_CONCURRENCY: '65' }, /POLICY_OPA_CONCURRENCY must be <= 64/],
      [
        'an OTLP endpoint with a query',
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318?x' },
        /OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL without a query/,
      ],
      [
        'a service name over 255 characters',
        { OTEL_SERVICE_NAME: 'x'.repeat(256) },
        /OTEL_SERVICE_NAME must NOT have more than 255 characters/,
      ],
      [
        'a poll maximum below the minimum',
        { POLICY_POLL_MIN_SECONDS: '10', POLICY_POLL_MAX_SECONDS: '5' },
        /POLICY_POLL_MAX_SECONDS must be >= POLICY_POLL_MIN_SECONDS/,
      ],
      [
        'a headers timeout longer than the request timeout',
        { HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '10000' },
        /HTTP_HEADERS_TIMEOUT_MS must be <= HTTP_REQUEST_TIMEOUT_MS/,
      ],
      ['a bind address that is a host name', { BIND_ADDRESS: 'localhost' }, /BIND_ADDRESS must be an IP address/],
      [
        'an admin bind address without an admin port',
        { ADMIN_BIND_ADDRESS: '127.0.0.1' },
        /ADMIN_BIND_ADDRESS needs ADMIN_PORT/,
      ],
      ['an admin port equal to the port', { PORT: '9000', ADMIN_PORT: '9000' }, /ADMIN_PORT must differ from PORT/],
      [
        'a TLS certificate without its key',
        { TLS_CERT_FILE: '/c.pem', ADMIN_PORT: '0' },
        /TLS_CERT_FILE and TLS_KEY_FILE go together/,
      ],
      [
        'TLS without an admin listener',
        { TLS_CERT_FILE: '/c.pem', TLS_KEY_FILE: '/k.pem' },
        /TLS_CERT_FILE needs ADMIN_PORT/,
      ],
      [
        'a client CA without a source of certificates',
        { TLS_CLIENT_CA_FILE: '/ca.pem' },
        /TLS_CLIENT_CA_FILE needs TLS_CERT_FILE or MTLS_CERTIFICATE_HEADER/,
      ],
      [
        'a certificate header that is no header name',
        { MTLS_CERTIFICATE_HEADER: 'x cert' },
        /MTLS_CERTIFICATE_HEADER must be a header name/,
      ],
      [
        'mTLS endpoint aliases without a source of certificates',
        { MTLS_ENDPOINT_BASE_URL: 'https://mtls.example' },
        /MTLS_ENDPOINT_BASE_URL needs TLS_CERT_FILE or MTLS_CERTIFICATE_HEADER/,
      ],
      [
        'mTLS endpoint aliases over plain http',
        { MTLS_ENDPOINT_BASE_URL: 'http://mtls.example', MTLS_CERTIFICATE_HEADER: 'x-cert' },
        /MTLS_ENDPOINT_BASE_URL must be an https:\/\/ URL/,
      ],
      ['several workers on an in-memory store', { WORKERS: '2' }, /WORKERS must be 1 with STORE_URL=sqlite::memory:/],
      ['0 workers', { WORKERS: '0' }, /WORKERS must be >= 1/],
      [
        'production without an admin key',
        { NODE_ENV: 'production', SERVICE_SECRETS_KEY: SECRET_KEY },
        /SERVICE_ADMIN_API_KEY is required when NODE_ENV=production/,
      ],
      [
        'production without a secrets key',
        { NODE_ENV: 'production', SERVICE_ADMIN_API_KEY: 'k'.repeat(16) },
        /SERVICE_SECRETS_KEY \(32 random bytes, base64url\) is required/,
      ],
    ];
    for (const [what, env, message] of refused) {
      it(`refuses ${what}`, function () {
        const problem = problemWith(env);
        expect(problem).to.match(/^invalid configuration: /);
        expect(problem).to.match(message);
      });
    }

    it('never shows the value of a refused secret', function () {
      const key = 'Z'.repeat(40);
      expect(problemWith({ SERVICE_SECRETS_KEY: key })).to.not.include(key);
    });

    it('accepts port 0 for both listeners (each then gets a free port)', function () {
      expect(load({ PORT: '0', ADMIN_PORT: '0' })).to.include({ port: 0, adminPort: 0 });
    });
  });
});

describe('unit: start-up warnings about unsafe settings (config configWarnings)', function () {
  const settings = (fields: Partial<Config>) =>
    ({
      production: true,
      issuer: 'https://as.example.test',
      metricsToken: 'm'.repeat(16),
      adminPort: null,
      ...fields,
    }) as Pick<Config, 'production' | 'issuer' | 'metricsToken' | 'adminPort'>;

  it('has none for a production server on https with a metrics token', function () {
    expect(configWarnings(settings({}))).to.deep.equal([]);
  });

  it('warns of a production issuer on plain http, naming RFC 8414', function () {
    const [warning] = configWarnings(settings({ issuer: 'http://as.example.test' }));
    expect(warning).to.match(/^ISSUER is http:\/\/as.example.test with NODE_ENV=production/);
    expect(warning).to.include('RFC 8414');
  });

  it('warns of /metrics open to anyone in production, naming the listener it is on', function () {
    expect(configWarnings(settings({ metricsToken: null }))[0]).to.include('answers anyone who reaches the server');
    expect(configWarnings(settings({ metricsToken: null, adminPort: 9100 }))[0]).to.include('the admin listener');
  });

  it('has none outside production, however the server is set', function () {
    expect(configWarnings(settings({ production: false, issuer: 'http://x', metricsToken: null }))).to.deep.equal([]);
  });
});
