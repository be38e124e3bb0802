import bcrypt from 'bcryptjs';
import type Provider from 'oidc-provider';
import { compareClientSecretsWith } from './internals.js';

/**
 * Client secrets are stored as BCrypt hashes (Admin API and registration alike), so the
 * presented secret is compared with bcrypt instead of oidc-provider's plain comparison.
 */
export function compareHashedClientSecrets(provider: Provider): void {
  compareClientSecretsWith(provider, (presented, stored) => bcrypt.compare(presented, stored));
}
