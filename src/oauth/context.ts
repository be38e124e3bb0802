import type { Configuration } from 'oidc-provider';
import type { Config } from '../config/index.js';
import type { Logger } from '../log/index.js';
import type { PolicyEngine, PolicyVocabulary } from '../policy/index.js';
import type { Sealer, Store } from '../store/index.js';
import type { ProviderSecrets } from './keys.js';

/** What a configuration slice may need to build its part of one tenant's provider. */
export interface ProviderContext {
  config: Config;
  secrets: ProviderSecrets;
  store: Store;
  /** Opens what is sealed in the store and makes the keyed digests of generated client secrets. */
  sealer: Sealer;
  policy: PolicyEngine;
  /** What policy data defines for the protocol (RAR types, scopes) this provider is built with (PolicyVocabulary.digest). */
  vocabulary: PolicyVocabulary;
  log: Logger;
  /** The store tenant this provider serves. */
  tenant: string;
  /**
   * '' for the provider of the shared issuer (ISSUER, the tenant named by X-Tenant-Id), `/t/<tenant>`
   * for the provider of the tenant's own issuer (ISSUER/t/<tenant>, reached by that path).
   */
  basePath: string;
  /**
   * A user logged out at /session/end (the store tenant, their subject id): what Arbiter tells
   * Shared Signals receivers (src/signals), awaited before the logout is answered. Absent: no one.
   */
  userLoggedOut?: (tenant: string, sub: string) => Promise<unknown>;
  /** Where logout tokens not delivered at once are kept to be delivered later (the outbox). Absent: they are only logged. */
  logoutRetries?: LogoutRetries;
}

/**
 * Where logout tokens not delivered at once are kept to be delivered later: the durable outbox,
 * wired by src/server.ts (src/oauth/end-session/backchannel.ts says what an entry holds).
 */
export interface LogoutRetries {
  append(entries: readonly { topic: string; stream: string; payload: unknown }[]): Promise<void>;
}

/** The issuer of the provider a context builds: ISSUER, or the tenant's own below it. */
export function providerIssuer({ config, basePath }: Pick<ProviderContext, 'config' | 'basePath'>): string {
  return `${config.issuer}${basePath}`;
}

/** One concern's part of the oidc-provider Configuration. */
export type ConfigurationSlice = (context: ProviderContext) => Configuration;

/** Merges slices; `features` (and other plain objects) merge one level deep so that each slice owns its features. */
export function mergeSlices(slices: ConfigurationSlice[], context: ProviderContext): Configuration {
  const merged: Record<string, unknown> = {};
  for (const slice of slices) {
    for (const [key, value] of Object.entries(slice(context))) {
      const existing = merged[key];
      merged[key] = isPlainObject(existing) && isPlainObject(value) ? { ...existing, ...value } : value;
    }
  }
  return merged as Configuration;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.getPrototypeOf(value) === Object.prototype
  );
}
