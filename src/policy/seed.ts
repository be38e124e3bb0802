/**
 * First start: the default policy pack in policies/ becomes shared policy rules and data in
 * the store, so that a fresh server makes useful decisions. Once any shared rule exists, the
 * store is the source of truth and the pack is not consulted again.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { projectPath } from '../config/index.js';
import { policyDataRecords, policyRuleRecords } from '../catalog/index.js';
import type { Logger } from '../log/index.js';
import { ConflictError, DEFAULT_TENANT, type Store, type StoredDoc, type TenantCollection } from '../store/index.js';
import { POLICY_DATA, POLICY_RULES } from './records.js';

export const POLICY_PACK_DIR = projectPath('policies');

/** The Cedar example pack and its schema, inside the pack folder (docs/policy.md, "Cedar"). */
export const CEDAR_EXAMPLES = 'cedar/';

export interface PolicyPack {
  rules: { kind: 'rego' | 'cedar'; path: string; content: string }[];
  data: { dataKey: string; payload: string }[];
}

/**
 * Reads a pack laid out like a bundle: rule files at their bundle path, data in
 * <key/as/folders>/data.json. Test files (*_test.rego) stay out: they are for `opa test`; so
 * does the Cedar example pack (cedar/): Cedar beside the Rego pack is an operator's choice.
 */
export async function readPolicyPack(dir = POLICY_PACK_DIR): Promise<PolicyPack> {
  const pack: PolicyPack = { rules: [], data: [] };
  for (const file of await filesUnder(dir)) {
    const path = relative(dir, file).split(sep).join('/');
    if (path.endsWith('_test.rego') || path.startsWith(CEDAR_EXAMPLES)) continue;
    if (path.endsWith('.rego') || path.endsWith('.cedar')) {
      pack.rules.push({ kind: path.endsWith('.rego') ? 'rego' : 'cedar', path, content: await readFile(file, 'utf8') });
    } else if (path.endsWith('/data.json')) {
      pack.data.push({
        dataKey: path.slice(0, -'/data.json'.length).replaceAll('/', '.'),
        payload: await readFile(file, 'utf8'),
      });
    }
  }
  return pack;
}

export async function seedDefaultPolicies(store: Store, log: Logger, dir = POLICY_PACK_DIR): Promise<void> {
  const rules = policyRuleRecords(store, DEFAULT_TENANT);
  if ((await rules.count({ tenantId: null })) > 0) return;
  const pack = await readPolicyPack(dir);
  const data = policyDataRecords(store, DEFAULT_TENANT);
  const now = new Date().toISOString();
  const shared = { version: null, tenantId: null, createdAt: now, updatedAt: now };
  for (const rule of pack.rules) {
    const id = await store.nextSequence(POLICY_RULES.name);
    const digest = `sha256:${createHash('sha256').update(rule.content).digest('hex')}`;
    await insertOnce(rules, { ...shared, ...rule, id, enabled: true, digest });
  }
  for (const entry of pack.data) {
    if (await data.findOne({ dataKey: entry.dataKey })) continue;
    await insertOnce(data, { ...shared, ...entry, id: await store.nextSequence(POLICY_DATA.name) });
  }
  log.info({ rules: pack.rules.length, data: pack.data.length }, 'default policy pack seeded');
}

/**
 * Adds the pack's rule at `path` to a store seeded by an older release that lacks it (a decision
 * point new in this release): a store that was never seeded, or holds the rule already (as
 * seeded or edited), is left as it is. True when it was added.
 */
export async function addMissingPackRule(store: Store, path: string, dir = POLICY_PACK_DIR): Promise<boolean> {
  const rules = policyRuleRecords(store, DEFAULT_TENANT);
  if ((await rules.count({ tenantId: null })) === 0) return false;
  if (await rules.findOne({ path, tenantId: null, version: null, mode: null })) return false;
  const content = await readFile(join(dir, path), 'utf8');
  const now = new Date().toISOString();
  await insertOnce(rules, {
    kind: 'rego',
    path,
    content,
    id: await store.nextSequence(POLICY_RULES.name),
    enabled: true,
    digest: `sha256:${createHash('sha256').update(content).digest('hex')}`,
    version: null,
    tenantId: null,
    createdAt: now,
    updatedAt: now,
  });
  return true;
}

/** Two nodes starting together may both seed: the loser's duplicates are simply skipped. */
async function insertOnce<T extends StoredDoc>(collection: TenantCollection<T>, doc: T): Promise<void> {
  try {
    await collection.insert(doc);
  } catch (error) {
    if (!(error instanceof ConflictError)) throw error;
  }
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return filesUnder(path);
      return Promise.resolve(entry.isFile() ? [path] : []);
    }),
  );
  return nested.flat().sort();
}
