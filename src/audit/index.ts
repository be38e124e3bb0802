export { AuditLog, AuditWriteError, SORTABLE_FIELDS, type AuditEntry, type AuditPage, type AuditPageQuery, type Outcome } from './log.js';
export { auditTrail, isAudited, type AuditFacts } from './middleware.js';
export { recordDecision, eachRecorded } from './decision.js';
