export {
  AuditLog,
  AuditWriteError,
  type AuditLogOptions,
  SORTABLE_FIELDS,
  AUDIT_COUNT_CAP,
  decodeAuditCursor,
  withinSkipBound,
  type AuditEntry,
  type AuditCursor,
  type AuditPage,
  type AuditPageQuery,
  type Outcome,
} from './log.js';
export {
  AUDIT_LOG_COLLECTION,
  ACTIVITY_COLLECTION,
  LATEST_DECISIONS_COLLECTION,
  AUDIT_SHAPES_COLLECTION,
} from './collections.js';
export { auditTrail, isAudited } from './middleware.js';
export { withdrawableCredentials, withdrawableIfUnaudited } from './issued.js';
export {
  auditedAuthorizationErrors,
  auditFactsOf,
  markAuthenticated,
  type AuditFacts,
  type AuditState,
} from './facts.js';
export { recordDecision } from './decision.js';
export { eachRecorded } from './recorded.js';
export { decisionsOfEntry, type RecordedDecisionCursor, type RecordedDecisionQuery } from './recorded-decisions.js';
export { ACTIVITY_MINUTES, type ActivitySummary, type ActivityMinute } from './activity.js';
