/**
 * Part of the composition root: the steps that bring a store written by an older Arbiter to the
 * layout this one reads (src/store/schema-version.ts runs them at every start and in
 * `arbiter migrate`). Add a step with the next number whenever a release changes how records are
 * stored, and say in docs/operations.md ("Upgrading") what it does; never change a step that has shipped.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { identityProviderRecords, policyRuleRecords } from './catalog/index.js';
// seed.js, not policy/index.js: the command line's store commands load this module, and the index loads the whole policy engine.
import { addMissingPackRule, POLICY_PACK_DIR } from './policy/seed.js';
import { DEFAULT_TENANT, pagesByKey, type Migration, type Store } from './store/index.js';
import { TENANTS_COLLECTION } from './tenancy/index.js';

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
    run: (store) => replaceUneditedPackRule(store, INTROSPECT_RULE, [INTROSPECT_RULE_0_1_DIGEST]),
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
  {
    to: 5,
    description:
      "the default pack's token exchange rule passes on, when only a delegation lets a client exchange another client's token of its user, no more than the scopes that delegation grants: a stored arbiter/token_exchange/token_exchange.rego still as an older pack seeded it is replaced with this release's; an edited one is left as it is",
    run: (store) => replaceUneditedPackRule(store, TOKEN_EXCHANGE_RULE, TOKEN_EXCHANGE_RULE_SEEDED_DIGESTS),
  },
  {
    to: 6,
    description:
      "each upstream identity provider now sends the browser back to a callback of its own, {issuer}/idp/callback/{idpId}, so that one provider cannot mix its responses up with another's: the providers registered before keep the shared {issuer}/idp/callback (sharedCallback: true), which is what their upstream knows, until an operator registers the new one there and sets sharedCallback to false",
    run: keepSharedCallbacks,
  },
  {
    to: 7,
    description:
      "the default pack's token exchange rule refuses authorization_details on an exchange that rests on a delegation (a delegation grants scopes on a resource, never the user's authorization details): a stored arbiter/token_exchange/token_exchange.rego still as an earlier pack seeded it is replaced with this release's; an edited one is left as it is",
    run: (store) => replaceUneditedPackRule(store, TOKEN_EXCHANGE_RULE, TOKEN_EXCHANGE_RULE_SEEDED_BEFORE_7),
  },
  {
    to: 8,
    description:
      "the default pack's token exchange rule no longer lets a client's own token carry, to the resource it is exchanged for, the scopes its entitlements for another resource type gave it, unless the client may hold them there too: a stored arbiter/token_exchange/token_exchange.rego still as an earlier pack seeded it is replaced with this release's; an edited one is left as it is",
    run: (store) => replaceUneditedPackRule(store, TOKEN_EXCHANGE_RULE, TOKEN_EXCHANGE_RULE_SEEDED_BEFORE_8),
  },
  {
    to: 9,
    description:
      "the default pack's registration rule finds a software statement's software_id in the denylist in any letter case (a UUID in capitals got past an entry in small letters): a stored arbiter/register/register.rego still as an earlier pack seeded it is replaced with this release's; an edited one is left as it is",
    run: (store) => replaceUneditedPackRule(store, REGISTER_RULE, REGISTER_RULE_SEEDED_DIGESTS),
  },
  {
    to: 10,
    description:
      "the default pack's helpers take the resource type a resource indicator names (urn:as:introspect, a type of policy data) before the type resolved for the request, which may be the caller's resource_type hint: a hint no longer drops the named type's scope ceiling and obligations (dpop_required, issue_refresh_token) at /token, refresh and token exchange. A stored arbiter/lib/lib.rego still as an earlier pack seeded it is replaced with this release's; an edited one is left as it is",
    run: (store) => replaceUneditedPackRule(store, LIB_RULE, LIB_RULE_SEEDED_DIGESTS),
  },
];

/** Every tenant's identity providers without `sharedCallback` get it (true): their upstream knows only the shared callback. */
async function keepSharedCallbacks(store: Store): Promise<void> {
  const tenants = store.collection(TENANTS_COLLECTION, DEFAULT_TENANT);
  const names = [DEFAULT_TENANT];
  for await (const page of pagesByKey(tenants, {}, '', 500)) names.push(...page.map((tenant) => String(tenant.id)));
  for (const tenant of names) {
    const providers = identityProviderRecords(store, tenant);
    for (const provider of await providers.find({ sharedCallback: null }))
      await providers.update(provider.id, { sharedCallback: true });
  }
}

const SSF_RULE = 'arbiter/ssf/ssf.rego';

const INTROSPECT_RULE = 'arbiter/introspect/introspect.rego';
/** The digest of that rule as the 0.1 pack seeded it. */
const INTROSPECT_RULE_0_1_DIGEST = 'sha256:a5c84bfcee8440693efd886efb8ce3d9cf704b626a47355c08284be623a2a2b9';

const TOKEN_EXCHANGE_RULE = 'arbiter/token_exchange/token_exchange.rego';
/** The digests of that rule as each earlier pack seeded it (every version in the project's history). */
const TOKEN_EXCHANGE_RULE_SEEDED_DIGESTS = [
  '13f951c867c280b649f0c5d949b9dc567df647e76e7e8d55e13d823a2d6f68fa',
  '6f26b784e97570c9e3f7b279bf64640187a2e0f607ae1f1e6bbbd6bd7292821c',
  '79ee678927b1b299ff650849e7fb1e60e26cf8ee70666b5f2ec0afd18bd3550b',
  '8eccce8b5fa55f184b111aa89ddf76cfcf9f2ac95ea243282f8117b11c3dd4e6',
  'bf5e68536b3767b012e2a08a5f2d4418400a3f77463fbd356f1561f4b191ae67',
  'cd4ba2a67842b58ee4ef0cca823fda556194b99e02006ea640b5f15f82e3be24',
  'f6a9ab0f54c55308abaf91c0b5a134a3f41b1a22edaff5000ad98af05c0067f5',
].map((hex) => `sha256:${hex}`);
/** Those, and the rule as schema step 5 left it. */
const TOKEN_EXCHANGE_RULE_SEEDED_BEFORE_7 = [
  ...TOKEN_EXCHANGE_RULE_SEEDED_DIGESTS,
  'sha256:b65a2983d10a664de513ce57c3f286427f81a980d4ddac23ff21629d6e902e4e',
];
/** Those, and the rule as schema step 7 left it. */
const TOKEN_EXCHANGE_RULE_SEEDED_BEFORE_8 = [
  ...TOKEN_EXCHANGE_RULE_SEEDED_BEFORE_7,
  'sha256:0b0d079f395b29b006e97225ec38fb28df5d651edab6817775ca238b146dc731',
];

const REGISTER_RULE = 'arbiter/register/register.rego';
/** The digests of that rule as each earlier pack seeded it (every version in the project's history). */
const REGISTER_RULE_SEEDED_DIGESTS = [
  '340376e811747031b761e5201bbc7a87ba6db54bdb16f894ef73baf6780882bd',
  '44376b42d72e137a5509c1d9a0ad17d482be500344db33240add2bb036cb258e',
  '8423c860c330af64ec533a9277bb691c453b7e04ad51da53426691216dfb3aef',
  '9214d06d75e4131c862b2c6faa37777b8d8201c2b8e22f59d4cbaff92bdbb965',
  'a40b4d2fe9ef341be5d913599109c333c0da014daee878553a330c302b4a2af7',
  'c7c7772314c93c109d91e46226f450d5a0c3a9b792d4329f31b59a967b83b9ca',
  'd231af4a26a7a3d0411ff96e4456a5a4597c0780d476924f3f57b55b755cbcf3',
  'fbf7af1cb2500a76f9b60687a8df270f3bdf5e6b5ca490a41ac802f3e1b60618',
].map((hex) => `sha256:${hex}`);

const LIB_RULE = 'arbiter/lib/lib.rego';
/** The digests of that rule as each earlier pack seeded it (every version in the project's history at this path). */
const LIB_RULE_SEEDED_DIGESTS = [
  '40b4185eedb6bdd97cd745b0fb402799cc7033f5a931f055a1a60951ab788661',
  '514c4de05820c5e6baaa2f914d4612234183a1b39cbe88f08786bca9c3a6af72',
  '632ba2bdffafda084b671b1431bf9811a0cc6584c2b9ca565ca094838fc7c79e',
  '700a1b140b850337dd4d91d28f1820e4b8359bfc391d774deb92d91eea214dda',
  '9e8effb7b676a0e5ec7a097ca1bc9015f35a68df4aaa062b2e5ac75d340c848b',
].map((hex) => `sha256:${hex}`);

/**
 * A fix to the default pack reaches a store seeded by an older release only through a step: the
 * pack is read at the first start alone. The shared rule at `path` is replaced by the pack's
 * file when it is still exactly as seeded (its content has one of `seededDigests`): an operator's edit wins.
 */
async function replaceUneditedPackRule(store: Store, path: string, seededDigests: readonly string[]): Promise<void> {
  const rules = policyRuleRecords(store, DEFAULT_TENANT);
  const stored = await rules.findOne({ path, tenantId: null, version: null, mode: null });
  if (!stored || !seededDigests.includes(digestOf(stored.content))) return;
  const content = await readFile(join(POLICY_PACK_DIR, path), 'utf8');
  await rules.upsert({ ...stored, content, digest: digestOf(content), updatedAt: new Date().toISOString() });
}

function digestOf(content: string): string {
  return `sha256:${createHash('sha256').update(content).digest('hex')}`;
}

/** The schema version this release writes. */
export const SCHEMA_VERSION = Math.max(...MIGRATIONS.map((step) => step.to));
