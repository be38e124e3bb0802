/** The delegation store: owners delegate UMA resource scopes; decisions see the active delegations. */
export { delegationRouter, DELEGATION_PATH, type DelegationDeps } from './router.js';
export {
  activeDelegationIds,
  activeDelegations,
  delegationsToClientBy,
  delegationsToSubjectUpTo,
  activeDelegationsOn,
  DELEGATION_KEPT_MS,
  DELEGATIONS_COLLECTION,
  revokeDelegationsOf,
  type Grantees,
} from './records.js';
