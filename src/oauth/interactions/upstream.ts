import { decodeProtectedHeader, type JWTPayload } from 'jose';
import * as client from 'openid-client';
import { RemoteDocuments } from '../../http/remote-documents.js';
import { JwksUnavailableError, RemoteKeySets } from '../../http/remote-jwks.js';
import { assertFetchableUrl, createOutbound, type Outbound, type OutboundOptions } from '../../http/outbound.js';
import { SignInError, unavailable } from './errors.js';
import type { IdentityProviderRecord } from './identity-providers.js';

/** OIDC Back-Channel Logout 1.0 §2.4: the event a logout token names. */
const BACK_CHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';
/** A logout token older than this is refused (the spec leaves "recent" to the RP). */
export const LOGOUT_TOKEN_MAX_AGE_SECONDS = 300;
/** How far an upstream's clock may be ahead of ours (a logout token `iat` in the future). */
export const LOGOUT_TOKEN_CLOCK_TOLERANCE_SECONDS = 30;
/** Discovery documents change rarely; re-reading them every few minutes picks up key and endpoint changes. */
const DISCOVERY_CACHE_MS = 5 * 60_000;
/** After a failed discovery, sign-ins and logout tokens of that issuer are refused at once for this long. */
const DISCOVERY_FAILURE_BACKOFF_MS = 10_000;
/** Issuers whose documents are kept (one per upstream identity provider of every tenant). */
const DISCOVERY_CACHE_MAX = 1000;
const DEFAULT_SCOPES = ['openid', 'profile', 'email'];
/** Upstream authorization errors a client can act on; anything else says "the upstream refused" as access_denied. */
const RELAYED_ERRORS = new Set([
  'access_denied',
  'login_required',
  'consent_required',
  'interaction_required',
  'account_selection_required',
  'temporarily_unavailable',
]);

/** The per-sign-in secrets that bind the upstream response to the request Arbiter sent. */
export interface UpstreamChecks {
  state: string;
  nonce: string;
  codeVerifier: string;
}

/** Fresh, unguessable checks for one upstream round trip. */
export function newChecks(): UpstreamChecks {
  return { state: client.randomState(), nonce: client.randomNonce(), codeVerifier: client.randomPKCECodeVerifier() };
}

/**
 * What the original authorization request asks of the authentication itself, for the upstream
 * provider that performs it (requirements.ts derives it from the interaction).
 */
export interface UpstreamHints {
  /** login, consent and select_account; only those the upstream supports are sent. */
  prompt: string[];
  loginHint?: string;
  uiLocales?: string;
  display?: string;
  acrValues?: string;
  maxAge?: number;
}

/** The only facts about a person Arbiter keeps (spec: UserInfo claims). */
export interface UpstreamIdentity {
  sub: string;
  name?: string;
  email?: string;
  emailVerified?: boolean;
  preferredUsername?: string;
  /** The upstream's Authentication Context Class Reference (ID token `acr`), which Arbiter's ID token repeats. */
  acr?: string;
  /** The upstream session (ID token `sid`), which a logout token may name alone (upstream-sessions.ts). */
  sid?: string;
}

export interface UpstreamOptions {
  /** Every request to an upstream (discovery, token, userinfo, JWKS) goes through this outbound policy. */
  outbound: OutboundOptions;
}

/** Arbiter as an OpenID Connect relying party of its tenants' upstream identity providers (openid-client). */
export class UpstreamProviders {
  private readonly discovered = new RemoteDocuments<client.ServerMetadata>({
    ttlMs: DISCOVERY_CACHE_MS,
    failureBackoffMs: DISCOVERY_FAILURE_BACKOFF_MS,
    maxEntries: DISCOVERY_CACHE_MAX,
  });
  private readonly outbound: Outbound;
  /**
   * openid-client's own https-only check is lifted exactly when the outbound policy allows
   * insecure loopback; the outbound guard still refuses http to anything but loopback.
   */
  private readonly execute: ((configuration: client.Configuration) => void)[];

  private readonly keySets: RemoteKeySets;

  constructor(private readonly options: UpstreamOptions) {
    this.outbound = createOutbound(options.outbound);
    this.keySets = new RemoteKeySets(() => this.outbound);
    // ID tokens are verified against the upstream's JWKS, although they come straight from its
    // token endpoint: openid-client would otherwise take any signature from it at face value.
    this.execute = [
      client.enableNonRepudiationChecks,
      ...(options.outbound.allowInsecureLoopback ? [client.allowInsecureRequests] : []),
    ];
  }

  /**
   * openid-client's own per-request timeout, in whole seconds; the outbound guard's
   * (OUTBOUND_TIMEOUT_MS, per request) ends a slow upstream first, so a user waits no longer than that.
   */
  private get timeoutSeconds(): number {
    return Math.ceil(this.options.outbound.timeoutMs / 1000);
  }

  /** The upstream authorization request: code flow with state, nonce and PKCE S256. */
  async authorizationUrl(
    idp: IdentityProviderRecord,
    /** `{issuer}/idp/callback`, registered at the upstream provider. */
    redirectUri: string,
    checks: UpstreamChecks,
    hints: UpstreamHints,
  ): Promise<URL> {
    const configuration = await this.configuration(idp);
    const prompt = forwardedPrompt(hints.prompt, configuration.serverMetadata().prompt_values_supported);
    return client.buildAuthorizationUrl(configuration, {
      redirect_uri: redirectUri,
      scope: upstreamScopes(idp).join(' '),
      state: checks.state,
      nonce: checks.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(checks.codeVerifier),
      code_challenge_method: 'S256',
      ...(prompt ? { prompt } : {}),
      ...optionalParameters({
        login_hint: hints.loginHint,
        ui_locales: hints.uiLocales,
        display: hints.display,
        acr_values: hints.acrValues,
        max_age: hints.maxAge === undefined ? undefined : String(hints.maxAge),
      }),
    });
  }

  /** Verifies the upstream's authorization response, redeems its code and reads who signed in. */
  async identity(idp: IdentityProviderRecord, callbackUrl: URL, checks: UpstreamChecks): Promise<UpstreamIdentity> {
    return identityFrom(await this.claims(idp, callbackUrl, checks));
  }

  /** The same, as every claim the ID token and UserInfo give (the ID token's sub and acr win). */
  async claims(
    idp: IdentityProviderRecord,
    callbackUrl: URL,
    checks: UpstreamChecks,
  ): Promise<Record<string, unknown> & { sub: string }> {
    const configuration = await this.configuration(idp);
    try {
      const tokens = await client.authorizationCodeGrant(configuration, callbackUrl, {
        expectedState: checks.state,
        expectedNonce: checks.nonce,
        pkceCodeVerifier: checks.codeVerifier,
        idTokenExpected: true,
      });
      const idToken = tokens.claims() as client.IDToken;
      const userinfo = configuration.serverMetadata().userinfo_endpoint
        ? await client.fetchUserInfo(configuration, tokens.access_token, idToken.sub)
        : {};
      // The authentication itself (sub, acr, sid) is what the ID token says; UserInfo adds the profile.
      return { ...idToken, ...userinfo, sub: idToken.sub, acr: idToken.acr, sid: idToken.sid };
    } catch (error) {
      throw signInErrorFor(error);
    }
  }

  /**
   * A logout token the upstream posted (OIDC Back-Channel Logout 1.0 §2.6), verified: signed with
   * the upstream's keys, issued by it to Arbiter's client there, recent, an explicit logout event
   * and no nonce; its claims, or a SignInError `invalid_request` naming what is wrong.
   */
  async logoutClaims(idp: IdentityProviderRecord, logoutToken: string): Promise<JWTPayload> {
    const metadata = { ...(await this.metadata(idp)), ...endpointOverrides(idp) };
    if (!metadata.jwks_uri) throw unavailable(`identity provider ${idp.idpId} publishes no jwks_uri`);
    let claims: JWTPayload;
    try {
      const typ = decodeProtectedHeader(logoutToken).typ?.toLowerCase();
      if (typ !== undefined && typ !== 'logout+jwt' && typ !== 'application/logout+jwt') throw new Error(`typ ${typ}`);
      claims = await this.keySets.verify(logoutToken, metadata.jwks_uri, {
        issuer: metadata.issuer,
        audience: idp.clientId,
        requiredClaims: ['iat', 'jti'],
        maxTokenAge: LOGOUT_TOKEN_MAX_AGE_SECONDS,
        clockTolerance: LOGOUT_TOKEN_CLOCK_TOLERANCE_SECONDS,
      });
    } catch (error) {
      // Keys that cannot be had say nothing of the token: the answer is a 503 (upstream-logout.ts), not a refusal.
      if (error instanceof JwksUnavailableError) throw error;
      throw new SignInError('invalid_request', `the logout token is not valid: ${(error as Error).message}`);
    }
    const events = claims.events as Record<string, unknown> | undefined;
    if (typeof events?.[BACK_CHANNEL_LOGOUT_EVENT] !== 'object')
      throw new SignInError('invalid_request', 'the logout token carries no back-channel logout event');
    if ('nonce' in claims) throw new SignInError('invalid_request', 'a logout token must not carry a nonce');
    return claims;
  }

  private async configuration(idp: IdentityProviderRecord): Promise<client.Configuration> {
    if (!idp.clientId) throw unavailable(`identity provider ${idp.idpId} has no clientId`);
    const metadata = { ...(await this.metadata(idp)), ...endpointOverrides(idp) };
    this.assertFetchableEndpoints(idp, metadata);
    const configuration = new client.Configuration(
      metadata,
      idp.clientId,
      idp.clientSecret,
      clientAuthentication(metadata, idp.clientSecret),
    );
    configuration.timeout = this.timeoutSeconds;
    configuration[client.customFetch] = this.outbound.fetch;
    for (const option of this.execute) option(configuration);
    return configuration;
  }

  private metadata(idp: IdentityProviderRecord): Promise<client.ServerMetadata> {
    return this.discovered.get(
      idp.issuer,
      async () =>
        (
          await client.discovery(new URL(idp.issuer), idp.clientId ?? '', undefined, undefined, {
            [client.customFetch]: this.outbound.fetch,
            execute: this.execute,
            timeout: this.timeoutSeconds,
          })
        ).serverMetadata(),
      (cause) => unavailable(`identity provider ${idp.idpId} could not be discovered at its issuer`, cause),
    );
  }

  /**
   * The endpoints Arbiter itself will call, checked before the user is sent upstream: a
   * discovery document naming a refused endpoint fails now rather than after the sign-in.
   * (Host names are checked again, after DNS, when they are fetched.)
   */
  private assertFetchableEndpoints(idp: IdentityProviderRecord, metadata: client.ServerMetadata): void {
    try {
      for (const url of [metadata.token_endpoint, metadata.userinfo_endpoint, metadata.jwks_uri]) {
        if (url) assertFetchableUrl(url, this.options.outbound.allowInsecureLoopback);
      }
    } catch (error) {
      throw unavailable(`identity provider ${idp.idpId} names an endpoint that Arbiter may not call`, error);
    }
  }
}

function endpointOverrides(idp: IdentityProviderRecord): Partial<client.ServerMetadata> {
  const overrides = {
    authorization_endpoint: idp.authorizationEndpoint,
    token_endpoint: idp.tokenEndpoint,
    userinfo_endpoint: idp.userinfoEndpoint,
    jwks_uri: idp.jwksUri,
  };
  return Object.fromEntries(Object.entries(overrides).filter(([, value]) => value));
}

/** Without a secret Arbiter is a public client (PKCE only); with one it uses the OAuth default, client_secret_basic, unless the upstream accepts only client_secret_post. */
function clientAuthentication(metadata: client.ServerMetadata, secret: string | undefined): client.ClientAuth {
  if (!secret) return client.None();
  const methods = metadata.token_endpoint_auth_methods_supported;
  const postOnly =
    methods !== undefined && !methods.includes('client_secret_basic') && methods.includes('client_secret_post');
  return postOnly ? client.ClientSecretPost(secret) : client.ClientSecretBasic(secret);
}

/** Arbiter needs the upstream `sub`, so `openid` is always asked for. */
function upstreamScopes(idp: IdentityProviderRecord): string[] {
  const scopes = idp.scopes?.length ? idp.scopes : DEFAULT_SCOPES;
  return scopes.includes('openid') ? scopes : ['openid', ...scopes];
}

/** The prompt values that the upstream says it supports (all of them when it does not say). */
function forwardedPrompt(prompt: string[], supported: unknown): string | undefined {
  const values = prompt.filter((value) => !Array.isArray(supported) || supported.includes(value));
  return values.length ? values.join(' ') : undefined;
}

/** The parameters that have a value; an absent or empty one is not sent. */
function optionalParameters(parameters: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(parameters).filter(
      (entry): entry is [string, string] => typeof entry[1] === 'string' && entry[1] !== '',
    ),
  );
}

function identityFrom(claims: Record<string, unknown>): UpstreamIdentity {
  const identity: UpstreamIdentity = { sub: String(claims.sub) };
  if (typeof claims.name === 'string') identity.name = claims.name;
  if (typeof claims.email === 'string') identity.email = claims.email;
  if (typeof claims.email_verified === 'boolean') identity.emailVerified = claims.email_verified;
  if (typeof claims.preferred_username === 'string') identity.preferredUsername = claims.preferred_username;
  if (typeof claims.acr === 'string' && claims.acr !== '') identity.acr = claims.acr;
  if (typeof claims.sid === 'string' && claims.sid !== '') identity.sid = claims.sid;
  return identity;
}

/**
 * What the client is told, by what went wrong upstream: its refusals keep their meaning
 * (access_denied otherwise), an upstream that cannot be reached in time or fails with a 5xx is
 * temporarily_unavailable, an answer that is not a protocol answer at all (not JSON, an
 * unexpected status) is server_error, and anything that fails verification is access_denied.
 */
function signInErrorFor(error: unknown): SignInError {
  if (error instanceof SignInError) return error;
  if (error instanceof client.AuthorizationResponseError) {
    const code = RELAYED_ERRORS.has(error.error) ? error.error : 'access_denied';
    // The upstream's own code is only echoed when it is a plain OAuth error code.
    const upstreamCode = /^[a-z_]{1,64}$/.test(error.error) ? error.error : 'an error';
    return new SignInError(code, `sign-in at the upstream identity provider ended with ${upstreamCode}`, error);
  }
  // OutboundRefusedError is a TypeError (a fetch network error), kept as the cause for the log.
  const timedOut =
    error instanceof client.ClientError && (error.code === 'OAUTH_TIMEOUT' || error.code === 'OAUTH_ABORT');
  if (error instanceof TypeError || timedOut || (upstreamStatus(error) ?? 0) >= 500) {
    return unavailable('the upstream identity provider could not be reached or failed', error);
  }
  if (error instanceof client.ClientError && UNREADABLE_RESPONSES.has(error.code ?? '')) {
    return new SignInError(
      'server_error',
      'the upstream identity provider gave an answer that is not a valid protocol response',
      error,
    );
  }
  return new SignInError('access_denied', "the upstream identity provider's response could not be verified", error);
}

/** openid-client's codes for an answer it could not even read as a protocol response. */
const UNREADABLE_RESPONSES = new Set([
  'OAUTH_RESPONSE_IS_NOT_JSON',
  'OAUTH_PARSE_ERROR',
  'OAUTH_RESPONSE_IS_NOT_CONFORM',
]);

/** The upstream's HTTP status when the error is about an HTTP answer. */
function upstreamStatus(error: unknown): number | undefined {
  if (error instanceof client.ResponseBodyError) return error.status;
  if (error instanceof client.ClientError && error.cause instanceof Response) return error.cause.status;
  return undefined;
}
