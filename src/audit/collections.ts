/**
 * The collections this folder declares, in a module that imports nothing at run time: the composition
 * root (src/collections.ts) prepares them, and the command line opens the store, without loading
 * the folder's code.
 */
import type { CollectionSpec } from '../store/index.js';

export const ACTIVITY_COLLECTION: CollectionSpec = { name: 'activity_shares', indexes: ['minute'] };

/**
 * Compound indexes end with the sort field, so that a page of the filters the console and the
 * Admin API use (a tenant, then an endpoint or a client; newest first) is read straight off an
 * index, at any depth with a cursor: at a million entries a page otherwise sorted them all.
 */
export const AUDIT_LOG_COLLECTION: CollectionSpec = {
  name: 'audit_logs',
  indexes: [
    'createdAt',
    'id',
    ['tenantId', 'id'],
    ['tenantId', 'endpoint', 'id'],
    ['tenantId', 'clientId', 'id'],
    ['endpoint', 'id'],
    // The log filtered by outcome (an operator's "errors only"): unindexed, a page that matched
    // little read the whole tenant's log on the event loop (found 2026-11-29: 1 s at 1,000,000).
    ['tenantId', 'outcome', 'id'],
    // Impact analysis reads a tenant's decisions newest first by createdAt (recorded-decisions.ts),
    // of one client too.
    ['tenantId', 'createdAt'],
    ['tenantId', 'clientId', 'createdAt'],
  ],
};

/**
 * The parts of an entry that repeat from request to request of one caller (what it asked, the
 * policy input but its time, the decision, its address and user agent), stored once per distinct
 * value under its digest: the entry keeps the digest (`shape`) and the input's time as an offset
 * from createdAt. A client_credentials entry fell from ~1,300 bytes of JSON to ~250 (bench/audit-size.ts).
 */
export const AUDIT_SHAPES_COLLECTION: CollectionSpec = { name: 'audit_shapes' };

export const LATEST_DECISIONS_COLLECTION: CollectionSpec = { name: 'latest_decisions', indexes: ['createdAt'] };
