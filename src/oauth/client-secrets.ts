import bcrypt from 'bcryptjs';
import type Provider from 'oidc-provider';

/**
 * Client secrets are stored as BCrypt hashes (Admin API and registration alike), so the
 * presented secret is compared with bcrypt instead of oidc-provider's plain comparison.
 */
export function compareHashedClientSecrets(provider: Provider): void {
  const prototype = provider.Client.prototype as unknown as { clientSecret?: string; compareClientSecret(actual: string): Promise<boolean> };
  prototype.compareClientSecret = async function compareClientSecret(this: { clientSecret?: string }, actual: string) {
    return typeof this.clientSecret === 'string' && typeof actual === 'string' && bcrypt.compare(actual, this.clientSecret);
  };
}
