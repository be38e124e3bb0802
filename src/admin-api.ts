import { adminRouter, type AdminApiKeys, type AdminRecord } from './admin/index.js';
import type { AuditLog } from './audit/index.js';
import type { Config } from './config/index.js';
import { dataEntryProblem, type PolicyEngine, type PolicyLab } from './policy/index.js';
import type { Sealer, Store } from './store/index.js';
import type { Logger } from './log/index.js';
import { tellClientsOfLogout, type TenantProviders } from './oauth/index.js';
import { adminChangeSignals, tenantSignalsView, type PolicyChangeSignals, type Transmitter } from './signals/index.js';
import type { Outbox } from './outbox/index.js';

/** What the Admin API is built with (src/routes.ts hands it the server's parts). */
export interface AdminApiParts {
  config: Config;
  /** The tenants' providers, whose clients a subject's revocation tells (back-channel logout). */
  providers: TenantProviders;
  log: Logger;
  store: Store;
  sealer: Sealer;
  policy: PolicyEngine;
  lab: PolicyLab;
  audit: AuditLog;
  /** The Shared Signals transmitter, told of the Admin changes that concern receivers. */
  signals: { transmitter: Transmitter; outbox: Outbox; policy?: PolicyChangeSignals };
}

/** The Admin API's router, with the checks that only the policy engine can make. */
export function adminApi(
  { config, store, sealer, policy, lab, audit, providers, log, signals }: AdminApiParts,
  keys: AdminApiKeys,
) {
  const recordedInputs = () => audit.recentPolicyInputs(config.policyCheckRecordedInputs);
  /** The check of one file on its own: its syntax and package (Rego, Cedar), a data entry's JSON and key. */
  const fileChecks = {
    'policy-rules': (rule) =>
      policy.validateRule(rule.kind as 'rego' | 'cedar', rule.path as string, rule.content as string),
    'policy-data': async (data) => dataEntryProblem(data.dataKey as string, data.payload as string),
  } satisfies Record<string, (record: Record<string, unknown>) => Promise<string | null>>;
  return adminRouter(store, {
    keys,
    sealer,
    maxBodyBytes: config.maxBodyBytes,
    audit,
    policy,
    issuer: config.issuer,
    signInIdp: config.adminSignInIdp,
    // Each file on its own first (its syntax, its package), then the bundle it would make as a whole:
    // compiled, and tried on the contract's examples and the inputs recently recorded in the audit log.
    checks: {
      'policy-rules': async (rule, { tenantId, existing }) =>
        toldTo(
          tenantId,
          (await fileChecks['policy-rules'](rule)) ??
            (await policy.bundleProblemWith({
              collection: 'rules',
              record: rule,
              tenantId,
              replacesId: existing?.id,
              recordedInputs,
              shadow: rule.mode === 'shadow',
            })),
        ),
      'policy-data': async (data, { tenantId, existing }) =>
        (await fileChecks['policy-data'](data)) ??
        policy.bundleProblemWith({
          collection: 'data',
          record: data,
          tenantId,
          replacesId: existing?.id,
          recordedInputs,
          shadow: data.mode === 'shadow',
        }),
    },
    // A deletion makes a bundle too: it must still compile and decide.
    removalChecks: {
      'policy-rules': async (existing, { tenantId }) =>
        policy.bundleProblemWith({
          collection: 'rules',
          record: null,
          tenantId,
          replacesId: existing.id,
          recordedInputs,
          shadow: existing.mode === 'shadow',
        }),
      'policy-data': async (existing, { tenantId }) =>
        policy.bundleProblemWith({
          collection: 'data',
          record: null,
          tenantId,
          replacesId: existing.id,
          recordedInputs,
          shadow: existing.mode === 'shadow',
        }),
    },
    historyVersions: config.policyHistoryVersions,
    logoutNotices: (tenantId, subjectId) =>
      tellClientsOfLogout((tenant) => providers.providerFor(tenant), store, tenantId, subjectId, log),
    changed: adminChangeSignals(store, signals.transmitter),
    outbox: signals.outbox,
    signalsView: (tenant) => tenantSignalsView(store, signals.outbox, tenant),
    tenants: config.tenants,
    decorate: { 'policy-data': (data: AdminRecord) => ({ inBundle: isBundled(data) }) },
    // A proposed change is checked file by file, then as one bundle (the lab's), before its impact is replayed.
    policyLab: {
      lab,
      fileChecks,
      recordedInputs,
      signalPreview: signals.policy && ((tenant, candidate) => signals.policy!.preview(tenant, candidate)),
    },
  });
}

function isBundled(record: { tenantId?: unknown; version?: unknown; mode?: unknown }): boolean {
  return !record.tenantId && !record.version && record.mode !== 'shadow';
}

/**
 * A tenant's rule is checked beside the shared rules (so that it may use their helpers), and OPA's
 * detail lines under each error describe them: the names, keys and types of the shared rules' data
 * (found 2026-11-29: a key confined to a tenant read the keys of a shared rule's object, which GET
 * /policy-rules refuses it). A tenant rule's problem keeps the error lines, which name the
 * candidate's own code; the shared policy's author sees everything.
 */
function toldTo(tenantId: string | null, problem: string | null): string | null {
  if (tenantId === null || problem === null) return problem;
  return problem
    .split('\n')
    .filter((line) => !/^\s/.test(line))
    .join('\n');
}
