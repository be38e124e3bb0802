/**
 * Part of the composition root: the steps that bring a store written by an older Arbiter to the
 * layout this one reads (src/store/schema-version.ts runs them at every start and in
 * `arbiter migrate`). Add a step with the next number whenever a release changes how records are
 * stored, and say in docs/operations.md ("Upgrading") what it does; never change a step that has shipped.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { policyRuleRecords } from './catalog/index.js';
// seed.js, not policy/index.js: the command line's store commands load this module, and the index loads the whole policy engine.
import { addMissingPackRule, POLICY_PACK_DIR } from './policy/seed.js';
import { DEFAULT_TENANT, type Migration, type Store } from './store/index.js';

export const MIGRATIONS: readonly Migration[] = [
  {
    to: 1,
    description:
      'baseline: the layout of Arbiter 0.1 (stores written before schema versions hold it already; nothing to change)',
    run: async () => undefined,
  },
  {
    to: 2,
    description:
      "the default pack's introspection rule refuses a resource server the tokens of other resources (RFC 7662 §4): a stored arbiter/introspect/introspect.rego still as the 0.1 pack seeded it is replaced with this release's; an edited one is left as it is",
    run: (store) => replaceUneditedPackRule(store, INTROSPECT_RULE, INTROSPECT_RULE_0_1_DIGEST),
  },
  {
    to: 3,
    description:
      'a SQLite file gives the space of purged records back (auto_vacuum=incremental): a file made by an older release is rewritten once (VACUUM: it takes as much free disk space again, and a while for a large file); nothing to do on MongoDB',
    run: async (store) => store.reclaimFreedSpace?.(),
  },
  {
    to: 4,
    description:
      "the Shared Signals decision point's default rule (arbiter/ssf/ssf.rego) is added to a store seeded by an older release, which has none (stream operations would fail closed); a store that has one keeps it",
    run: async (store) => void (await addMissingPackRule(store, SSF_RULE)),
  },
];

const SSF_RULE = 'arbiter/ssf/ssf.rego';

const INTROSPECT_RULE = 'arbiter/introspect/introspect.rego';
/** The digest of that rule as the 0.1 pack seeded it. */
const INTROSPECT_RULE_0_1_DIGEST = 'sha256:a5c84bfcee8440693efd886efb8ce3d9cf704b626a47355c08284be623a2a2b9';

/**
 * A fix to the default pack reaches a store seeded by an older release only through a step: the
 * pack is read at the first start alone. The shared rule at `path` is replaced by the pack's
 * file when it is still exactly as seeded (its content has `seededDigest`): an operator's edit wins.
 */
async function replaceUneditedPackRule(store: Store, path: string, seededDigest: string): Promise<void> {
  const rules = policyRuleRecords(store, DEFAULT_TENANT);
  const stored = await rules.findOne({ path, tenantId: null, version: null, mode: null });
  if (!stored || digestOf(stored.content) !== seededDigest) return;
  const content = await readFile(join(POLICY_PACK_DIR, path), 'utf8');
  await rules.upsert({ ...stored, content, digest: digestOf(content), updatedAt: new Date().toISOString() });
}

function digestOf(content: string): string {
  return `sha256:${createHash('sha256').update(content).digest('hex')}`;
}

/** The schema version this release writes. */
export const SCHEMA_VERSION = Math.max(...MIGRATIONS.map((step) => step.to));
