/**
 * UMA 2.0: the protection API (resource registration, permission tickets) and what the UMA grant
 * at /token (src/oauth/token/grants/uma-ticket) and the delegation store need of its records.
 */
export { umaRouter, PROTECTION } from './router.js';
export type {
  ApiContext,
  ApiState,
  ClientCaller,
  ClientCallers,
  TokenCaller,
  TokenCallers,
  TokenRequirement,
  UmaDeps,
} from './deps.js';
export { RESOURCE_REGISTRATION_PATH } from './registration.js';
export { PERMISSION_PATH } from './permission.js';
export {
  UMA_RESOURCES_COLLECTION,
  findResource,
  umaResources,
  resourceInput,
  type ResourceOwner,
  type UmaResourceRecord,
} from './resources.js';
export {
  PERMISSION_TICKETS_COLLECTION,
  deleteTicketsOf,
  findTicket,
  redeemTicket,
  type RequestedPermission,
  type TicketRecord,
} from './tickets.js';
export { decidePermissions, grantedScopes, type PermissionAnswer, type PermissionQuestion } from './decide.js';
export { scopeName } from './schemas.js';
