import type Router from '@koa/router';
import { auditFactsOf } from '../audit/index.js';
import { readOptionalJsonBody } from '../http/body.js';
import { assertValid } from '../http/validation.js';
import { MAX_SECRET_GRACE_SECONDS, rotateClientSecret } from '../oauth/index.js';
import type { AdminChange } from '../signals/index.js';
import type { Sealer, Store } from '../store/index.js';
import { storeTenant } from '../tenancy/index.js';
import type { AdminContext } from './state.js';

/** The body of POST /clients/{clientId}/secret (none at all: a rotation without grace). */
export const SECRET_ROTATION_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    graceSeconds: {
      type: 'integer',
      minimum: 0,
      maximum: MAX_SECRET_GRACE_SECONDS,
      default: 0,
      description:
        'how long the previous secret stays valid beside the new one, in seconds (0: it stops working at once; at most 30 days)',
    },
  },
} as const;

/** The answer of a rotation: the new secret, shown this once, as a create shows a generated one. */
export const ROTATED_SECRET_SCHEMA = {
  type: 'object',
  required: ['clientId', 'generatedClientSecret', 'previousSecretValidUntil'],
  additionalProperties: false,
  properties: {
    clientId: { type: 'string' },
    generatedClientSecret: {
      type: 'string',
      description: 'the new secret (256 bits), shown only in this answer; only its keyed digest is stored',
    },
    previousSecretValidUntil: {
      type: ['string', 'null'],
      format: 'date-time',
      description: 'until when the previous secret is still accepted (null: it no longer is)',
    },
  },
} as const;

/**
 * POST /clients/{clientId}/secret: a new generated secret for a confidential client, the
 * previous one valid for `graceSeconds` more, so that every replica of the client can change
 * over without a second of refusals (src/oauth/clients/secrets.ts, rotateClientSecret). The
 * audit entry says which client and how long the grace is; never either secret.
 */
export function clientSecretRoutes(
  router: Router,
  store: Store,
  sealer: Sealer,
  maxBodyBytes: number,
  tenantOf: (ctx: AdminContext) => string | null,
  changed?: (change: AdminChange) => Promise<unknown>,
): void {
  router.post('/clients/:key/secret', async (ctx) => {
    const body = await readOptionalJsonBody(ctx, maxBodyBytes);
    assertValid<{ graceSeconds?: number }>(SECRET_ROTATION_SCHEMA, body);
    const graceSeconds = body.graceSeconds ?? 0;
    const tenantId = tenantOf(ctx);
    const audit = auditFactsOf(ctx.state);
    audit.clientId = ctx.params.key;
    const rotated = await rotateClientSecret(
      { store, sealer, tenant: storeTenant(tenantId) },
      ctx.params.key!,
      graceSeconds,
      tenantId ? ` in tenant ${tenantId}` : '',
    );
    const previousSecretValidUntil = rotated.previousValidUntil?.toISOString() ?? null;
    await changed?.({ kind: 'client-secret', tenant: storeTenant(tenantId), clientId: rotated.clientId });
    audit.result = { secret: 'rotated', graceSeconds: String(graceSeconds), previousSecretValidUntil };
    ctx.body = { clientId: rotated.clientId, generatedClientSecret: rotated.secret, previousSecretValidUntil };
  });
}
