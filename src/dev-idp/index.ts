import type { Server } from 'node:http';
import Provider, { type Configuration } from 'oidc-provider';

export interface DevIdpOptions {
  port: number;
  /** Where Arbiter's upstream callback lives, e.g. http://localhost:9000/idp/callback. */
  redirectUris: string[];
  /** Issuer URL; defaults to http://localhost:<port>. */
  issuer?: string;
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
      },
    ],
    claims: { openid: ['sub'], profile: ['name', 'preferred_username'], email: ['email', 'email_verified'] },
    scopes: ['openid', 'profile', 'email'],
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
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
  return provider;
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
