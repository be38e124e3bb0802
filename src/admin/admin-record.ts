import type { StoredDoc } from '../store/index.js';

/** A record of an Admin API collection as stored: what every collection's records share. */
export type AdminRecord = StoredDoc & { id: number; tenantId: string | null; createdAt: string; updatedAt: string };
