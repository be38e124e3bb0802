import type { InputParties, PolicyEngine } from '../policy/index.js';
import type { Store } from '../store/index.js';
import type { TokenCallers } from '../oauth/shared/callers.js';

/** What the UMA routes (./registration.ts, ./permission.ts) are built with; ./router.ts hands it to each. */
export interface UmaDeps {
  store: Store;
  policy: PolicyEngine;
  /** Authenticates the PAT (src/oauth). */
  callers: TokenCallers;
  parties: InputParties;
  issuer: string;
  maxBodyBytes: number;
  /** Lifetime of a permission ticket (spec: 5 minutes). */
  ticketSeconds: number;
}
