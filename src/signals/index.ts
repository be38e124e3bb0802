/**
 * The OpenID Shared Signals (SSF 1.0) transmitter of each tenant: streams owned by receivers
 * that are clients of the tenant, CAEP and RISC events from what Arbiter knows (Admin changes,
 * revocations), delivered through the durable outbox (src/outbox) by push (RFC 8935) or poll
 * (RFC 8936) as Security Event Tokens (RFC 8417) signed with the tenant's keys.
 */
export { signalsRouter, SSF_CONFIGURATION_PATH, SSF_PATHS, type SignalsDeps } from './router.js';
export { Transmitter, SSF_TOPIC, type EventParty, type SignalEvent } from './transmitter.js';
export { SSF_POLL_COLLECTION, SSF_STREAMS_COLLECTION, SSF_POLICY_RECHECKS_COLLECTION } from './collections.js';
export { EVENT_TYPES, EVENTS_SUPPORTED, resealStreamCredentials } from './streams.js';
export { adminChangeSignals, userLogout, type AdminChange } from './admin-changes.js';
export { PolicyChangeSignals, SIGNALS_POLICY_TOPIC, type IntrospectionDecisions } from './policy-changes.js';
export { tenantSignalsView, type TenantSignalsView } from './delivery-view.js';
