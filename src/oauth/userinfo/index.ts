import type { ArbiterMiddleware } from '../state.js';
import { routes } from '../routes.js';
import { formBody } from '../shared/form-body.js';
import { userinfoChallenge } from './challenge.js';

export { accounts } from './accounts.js';

export const USERINFO_PATH = routes.userinfo;

/**
 * What Arbiter adds at /userinfo in front of oidc-provider, in order: the form of a POST read with
 * the size limit, and every refusal made the spec's 401 challenge. The claims are the subject's
 * (accounts.ts).
 */
export function userinfoMiddleware(maxBodyBytes: number): ArbiterMiddleware[] {
  return [formBody(maxBodyBytes), userinfoChallenge];
}
