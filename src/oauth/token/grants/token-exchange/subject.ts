import type { SubjectInput, SubjectTokenInput } from '../../../../policy/index.js';
import type { TokenBinding } from '../sender-binding.js';

/** The subject token, validated by protocol code, as the decision and the issuance need it. */
export interface ResolvedSubject {
  /** `input.subject_token` of the token_exchange decision. */
  token: SubjectTokenInput;
  /** `input.subject`: the user the token stands for, or null (a client's own token). */
  subject: SubjectInput | null;
  /** The key the token is bound to, which the request must prove it holds (sender-binding.ts). */
  binding: TokenBinding;
  /** The RFC 9396 authorization details an access token of this server carries (none for an ID token). */
  authorizationDetails?: readonly unknown[];
  /** An access token of this server: its store id, after those of the tokens it was exchanged from (EXCHANGED_FROM). */
  restsOn?: string[];
  /** The external issuer whose ID token said who the user is, at the start of the chain (SUBJECT_ISSUER). */
  subjectIssuer?: string;
  /**
   * An access token issued on its user's delegations to its client (DELEGATION_IDS): it stands for
   * what they delegate, not for the user, as a claim token, nor when it is exchanged again.
   */
  delegations?: string[];
}

/** An external ID token is bound to nothing Arbiter can check; it is verified by its signature alone. */
export const UNBOUND: TokenBinding = { jkt: null, x5t: null };
