import { openedWith, sealedFor } from '../../store/index.js';
import type { UpstreamChecks } from './upstream.js';

// Apart from upstream.ts, which loads the outbound HTTP module: the store's commands load the
// pending sign-ins' collection (upstream-logins.ts), never an HTTP client.

/**
 * What a sign-in under way stores of its checks until the callback: the nonce and PKCE verifier,
 * sealed for the holder of its state (sealedFor), which the store keeps only as a digest.
 */
export function sealedChecks(checks: UpstreamChecks): string {
  return sealedFor(checks.state, JSON.stringify({ nonce: checks.nonce, codeVerifier: checks.codeVerifier }));
}

/** The checks `sealedChecks` stored, opened with the callback's state; null when that state does not open them. */
export function openedChecks(state: string, sealed: string): UpstreamChecks | null {
  const opened = openedWith(state, sealed);
  if (opened === null) return null;
  const { nonce, codeVerifier } = JSON.parse(opened) as { nonce: string; codeVerifier: string };
  return { state, nonce, codeVerifier };
}
