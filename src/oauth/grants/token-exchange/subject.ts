import type { SubjectInput, SubjectTokenInput } from '../../../policy/index.js';

/** The subject token, validated by protocol code, as the decision and the issuance need it. */
export interface ResolvedSubject {
  /** `input.subject_token` of the token_exchange decision. */
  token: SubjectTokenInput;
  /** `input.subject`: the user the token stands for, or null (a client's own token). */
  subject: SubjectInput | null;
}
