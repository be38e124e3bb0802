export {
  COLLECTIONS,
  definitionFor,
  definitionOfStore,
  storeSpecOf,
  clientRecords,
  identityProviderRecords,
  initialAccessTokenRecords,
  policyDataRecords,
  policyRuleRecords,
  presentedForm,
  schemaTakes,
  storedForm,
  resourceRecords,
  resourceServerRecords,
  resourceTypeRecords,
  subjectRecords,
  type CollectionDefinition,
  type RecordAccessor,
} from './collections.js';
export {
  CLIENT_GRANT_TYPES,
  INTROSPECTION_SIGNING_ALGS,
  MAX_CLIENT_ID_LENGTH,
  REQUEST_OBJECT_SIGNING_ALGS,
} from './schemas.js';
export type {
  ClientFields,
  ClientRecord,
  IdentityProviderRecord,
  InitialAccessTokenRecord,
  PolicyDataRecord,
  PolicyRuleRecord,
  ResourceRecord,
  ResourceServerRecord,
  ResourceTypeRecord,
  SubjectRecord,
} from './types.js';
export { redirectUriProblem, registrableRedirectUriProblem, webUriProblem } from './registered-uris.js';
export { publicKeySetProblem } from './public-keys.js';
