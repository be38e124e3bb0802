import type Provider from 'oidc-provider';
import { errors } from 'oidc-provider';
import { storageDigest, type Store } from '../../store/index.js';
import { oidcParams } from '../shared/oidc-params.js';
import type { GrantSource, SourceLookup } from '../token/grants/token-input.js';

/** RFC 8628 §3.2: the polling interval a device keeps to when the response names none (5 seconds). */
export const POLL_INTERVAL_SECONDS = 5;

/** A device code as oidc-provider issues it: a nanoid (a stored reference, `digest:…`, is never one). */
const DEVICE_CODE = /^[A-Za-z0-9_-]{16,128}$/;

/**
 * The device code a token request presents, while it waits for its user (RFC 8628 §3.5): an
 * unknown one is invalid_grant; an expired one expired_token; one the user refused (or whose
 * sign-in failed) answers that error; one no user has approved yet authorization_pending, or
 * slow_down when the device polls again within the interval. Only an approved code reaches the
 * `token` decision, with its user as the subject. The pace is counted in the store (one window
 * per device code, named by its digest), so every node and worker counts together.
 */
export function deviceCodeAwaitingUser(provider: Provider, store: Store): SourceLookup {
  return async (ctx) => {
    const value = oidcParams(ctx).device_code ?? '';
    const code = DEVICE_CODE.test(value)
      ? await provider.DeviceCode.find(value, { ignoreExpiration: true })
      : undefined;
    if (!code || code.clientId !== ctx.oidc.client!.clientId)
      throw new errors.InvalidGrant('the device code is unknown or was issued to another client');
    if (code.isExpired)
      throw new errors.ExpiredToken('the device code has expired: start again with a new device authorization request');
    if (code.error) throw new errors.CustomOIDCProviderError(code.error, code.errorDescription);
    if (!code.accountId) {
      const { count } = await store.addToWindow(`device-poll ${storageDigest(value)}`, POLL_INTERVAL_SECONDS * 1000);
      if (count > 1)
        throw new errors.CustomOIDCProviderError(
          'slow_down',
          `poll at most once every ${POLL_INTERVAL_SECONDS} seconds, and ${POLL_INTERVAL_SECONDS} seconds less often from now on (RFC 8628 §3.5)`,
        );
      throw new errors.AuthorizationPending();
    }
    return code as GrantSource;
  };
}
