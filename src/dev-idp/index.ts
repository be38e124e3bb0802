import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import Provider, { type Configuration } from 'oidc-provider';

export interface DevIdpOptions {
  port: number;
  /** Where Arbiter's upstream callback lives, e.g. http://localhost:9000/idp/callback. */
  redirectUris: string[];
  /** Issuer URL; defaults to http://localhost:<port>. */
  issuer?: string;
  /** Where it posts logout tokens when a user logs out here (Arbiter's /idp/backchannel-logout); none: it posts none. */
  backchannelLogoutUri?: string;
  /**
   * What its logout tokens name: the user and the session (`sub` and `sid`, the default), or the
   * session alone (`sid`, as OIDC Back-Channel Logout 1.0 §2.4 allows). Either way its ID tokens carry `sid`.
   */
  logoutTokens?: 'sub+sid' | 'sid';
}

export const DEV_IDP_CLIENT = { clientId: 'arbiter', clientSecret: 'arbiter-dev-secret' };

/**
 * A real oidc-provider playing the upstream identity provider in development and tests.
 * Its development interactions accept any login and password; the login becomes the subject.
 */
export function createDevIdp(options: DevIdpOptions): Provider {
  const issuer = options.issuer ?? `http://localhost:${options.port}`;
  const configuration: Configuration = {
    clients: [
      {
        client_id: DEV_IDP_CLIENT.clientId,
        client_secret: DEV_IDP_CLIENT.clientSecret,
        redirect_uris: options.redirectUris,
        response_types: ['code'],
        grant_types: ['authorization_code'],
        ...(options.backchannelLogoutUri
          ? { backchannel_logout_uri: options.backchannelLogoutUri, backchannel_logout_session_required: true }
          : {}),
      },
    ],
    // acr under openid: released whenever a sign-in has one (see stateRequestedAcr), without a fixed acrValues list.
    claims: { openid: ['sub', 'acr'], profile: ['name', 'preferred_username'], email: ['email', 'email_verified'] },
    scopes: ['openid', 'profile', 'email'],
    features: { devInteractions: { enabled: true }, backchannelLogout: { enabled: true } },
    pkce: { required: () => true },
    // It posts logout tokens to Arbiter on this machine, a loopback address that the dispatcher
    // oidc-provider hands its fetch refuses: a development tool's fetch goes without it.
    fetch: (url, init) => fetch(url, { ...init, dispatcher: undefined } as RequestInit),
    async findAccount(_ctx, sub) {
      return {
        accountId: sub,
        async claims() {
          return {
            sub,
            preferred_username: sub,
            name: displayName(sub),
            email: `${sub}@example.test`,
            email_verified: true,
          };
        },
      };
    },
  };
  const provider = new Provider(issuer, configuration);
  provider.proxy = true;
  if (options.logoutTokens === 'sid') sendSidOnlyLogoutTokens(provider);
  provider.use(async (ctx, next) => {
    const resumed = RESUME_PATH.exec(ctx.path);
    if (ctx.method === 'GET' && resumed) await stateRequestedAcr(provider, resumed[1]!);
    await next();
  });
  return provider;
}

/** The part of oidc-provider's Client its back-channel logout uses (its typings leave the method out). */
interface LogoutClient {
  backchannelLogoutUri: string;
  backchannelLogout(sub: string, sid: string): Promise<void>;
}

/**
 * Makes the provider's logout tokens name the session only: oidc-provider always puts `sub` in
 * them, so its delivery is replaced by one that issues the same token (signed, `typ: logout+jwt`,
 * the event, a `jti`) without it.
 */
function sendSidOnlyLogoutTokens(provider: Provider): void {
  const Client = provider.Client as unknown as { prototype: LogoutClient };
  Client.prototype.backchannelLogout = async function (this: LogoutClient, _sub: string, sid: string) {
    const logoutToken = new provider.IdToken({}, { client: this as unknown as InstanceType<typeof provider.Client> });
    logoutToken.set('events', { 'http://schemas.openid.net/event/backchannel-logout': {} });
    logoutToken.set('jti', randomUUID());
    logoutToken.set('sid', sid);
    const response = await fetch(this.backchannelLogoutUri, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ logout_token: await logoutToken.issue({ use: 'logout' }) }),
    });
    if (response.status !== 200 && response.status !== 204)
      throw new Error(`expected 200 OK from ${this.backchannelLogoutUri}, got ${response.status}`);
  };
}

/** Where oidc-provider resumes an authorization request once an interaction has a result. */
const RESUME_PATH = /^\/auth\/([\w-]+)$/;

/**
 * Gives a finished login the acr its request asked for: the first value of `acr_values`. Any password "achieves" any level here, so
 * that a relying party's acr handling (Arbiter's: acr_values passed upstream, acr in its ID
 * token) can be tried; a request that asks for none gets no acr. oidc-provider's development
 * login form has no such field, so the interaction's result is completed before it resumes.
 */
async function stateRequestedAcr(provider: Provider, uid: string): Promise<void> {
  const interaction = await provider.Interaction.find(uid);
  const login = interaction?.result?.login;
  if (!interaction || !login || login.acr) return;
  const acr = requestedAcr(interaction.params);
  if (!acr) return;
  interaction.result = { ...interaction.result, login: { ...login, acr } };
  await interaction.save(interaction.exp - Math.floor(Date.now() / 1000));
}

function requestedAcr(params: Record<string, unknown>): string | undefined {
  const values = typeof params.acr_values === 'string' ? params.acr_values.split(' ').filter(Boolean) : [];
  return values[0];
}

export async function startDevIdp(
  options: DevIdpOptions,
): Promise<{ provider: Provider; server: Server; close(): Promise<void> }> {
  const provider = createDevIdp(options);
  const server = provider.listen(options.port);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  return {
    provider,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function displayName(login: string): string {
  return login.charAt(0).toUpperCase() + login.slice(1);
}
