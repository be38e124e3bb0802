import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { policyRuleRecords } from '../../src/catalog/index.js';
import { openArbiterStore } from '../../src/collections.js';
import { MIGRATIONS } from '../../src/migrations.js';
import { POLICY_PACK_DIR } from '../../src/policy/index.js';
import { DEFAULT_TENANT, migrate, type Store } from '../../src/store/index.js';

const PATH = 'arbiter/introspect/introspect.rego';
/** The rule exactly as the 0.1 pack seeded it. */
const SEEDED_0_1 = readFileSync(join(dirname(fileURLToPath(import.meta.url)), 'fixtures/introspect-0.1.rego'), 'utf8');
const CURRENT = readFileSync(join(POLICY_PACK_DIR, PATH), 'utf8');

/**
 * The default pack is read at the first start only, so a fix to one of its rules reaches a store
 * seeded by an older release through a migration: the introspection rule that refuses a resource
 * server the tokens of other resources replaces the 0.1 rule where an operator did not edit it.
 */
describe('Upgrading a store seeded by 0.1: the default introspection rule', function () {
  async function storeAtVersion1(content: string): Promise<Store> {
    const store = await openArbiterStore('sqlite::memory:');
    await migrate(
      store,
      MIGRATIONS.filter((step) => step.to === 1),
    );
    await policyRuleRecords(store, DEFAULT_TENANT).insert({
      id: 1,
      kind: 'rego',
      path: PATH,
      content,
      enabled: true,
      version: null,
      tenantId: null,
    });
    return store;
  }

  const stored = async (store: Store) => (await policyRuleRecords(store, DEFAULT_TENANT).get(1))!.content;

  it('is replaced with the current pack when still as 0.1 seeded it', async function () {
    expect(CURRENT).not.to.equal(SEEDED_0_1);
    const store = await storeAtVersion1(SEEDED_0_1);
    try {
      expect(await migrate(store, MIGRATIONS)).to.include({ from: 1 });
      expect(await stored(store)).to.equal(CURRENT);
    } finally {
      await store.close();
    }
  });

  it('is left as it is when an operator edited it', async function () {
    const edited = `${SEEDED_0_1}\n# an operator's note\n`;
    const store = await storeAtVersion1(edited);
    try {
      await migrate(store, MIGRATIONS);
      expect(await stored(store)).to.equal(edited);
    } finally {
      await store.close();
    }
  });
});

/**
 * A decision point new in a release has no rule in a store seeded before it: schema step 4 adds
 * the Shared Signals rule there, and only there.
 */
describe('Upgrading a store seeded before the ssf decision point', function () {
  const SSF_RULE = 'arbiter/ssf/ssf.rego';
  const SSF_CONTENT = readFileSync(join(POLICY_PACK_DIR, SSF_RULE), 'utf8');

  async function storeAtVersion3(rules: { path: string; content: string }[]): Promise<Store> {
    const store = await openArbiterStore('sqlite::memory:');
    await migrate(
      store,
      MIGRATIONS.filter((step) => step.to <= 3),
    );
    for (const rule of rules)
      await policyRuleRecords(store, DEFAULT_TENANT).insert({
        id: await store.nextSequence(policyRuleRecords.spec.name),
        kind: 'rego',
        ...rule,
        enabled: true,
        version: null,
        tenantId: null,
      });
    return store;
  }

  const ssfRule = async (store: Store) =>
    policyRuleRecords(store, DEFAULT_TENANT).findOne({ path: SSF_RULE, tenantId: null, version: null, mode: null });

  it('gets the pack rule when it was seeded without one', async function () {
    const store = await storeAtVersion3([{ path: PATH, content: CURRENT }]);
    try {
      expect(await migrate(store, MIGRATIONS)).to.include({ from: 3 });
      const added = await ssfRule(store);
      expect(added?.content).to.equal(SSF_CONTENT);
      expect(added?.enabled).to.equal(true);
      expect(added?.id).to.be.a('number').and.not.equal(1);
    } finally {
      await store.close();
    }
  });

  it("keeps an operator's own rule at that path", async function () {
    const own = 'package arbiter.ssf\n\ndefault decision := {"allow": false}\n';
    const store = await storeAtVersion3([
      { path: PATH, content: CURRENT },
      { path: SSF_RULE, content: own },
    ]);
    try {
      await migrate(store, MIGRATIONS);
      expect((await ssfRule(store))?.content).to.equal(own);
    } finally {
      await store.close();
    }
  });

  it('adds nothing to a store that was never seeded (the first start seeds the whole pack)', async function () {
    const store = await storeAtVersion3([]);
    try {
      await migrate(store, MIGRATIONS);
      expect(await ssfRule(store)).to.equal(null);
    } finally {
      await store.close();
    }
  });
});

const TOKEN_EXCHANGE_RULE = 'arbiter/token_exchange/token_exchange.rego';
const TOKEN_EXCHANGE_NOW = readFileSync(join(POLICY_PACK_DIR, TOKEN_EXCHANGE_RULE), 'utf8');
const fixture = (name: string) =>
  readFileSync(join(dirname(fileURLToPath(import.meta.url)), `fixtures/${name}`), 'utf8');

/** The token exchange rule stored as `content` in a store at schema version `from`, once migrated to this release's. */
function tokenExchangeRuleMigratedFrom(from: number, content: string): Promise<string | undefined> {
  return packRuleMigratedFrom(TOKEN_EXCHANGE_RULE, from, content);
}

/** The shared rule at `path` stored as `content` in a store at schema version `from`, once migrated to this release's. */
async function packRuleMigratedFrom(path: string, from: number, content: string): Promise<string | undefined> {
  const store = await openArbiterStore('sqlite::memory:');
  try {
    await migrate(
      store,
      MIGRATIONS.filter((step) => step.to <= from),
    );
    await policyRuleRecords(store, DEFAULT_TENANT).insert({
      id: 1,
      kind: 'rego',
      path,
      content,
      enabled: true,
      version: null,
      tenantId: null,
    });
    expect(await migrate(store, MIGRATIONS)).to.include({ from });
    return (await policyRuleRecords(store, DEFAULT_TENANT).get(1))?.content;
  } finally {
    await store.close();
  }
}

/**
 * Schema step 5: the token exchange rule that bounds an exchange resting on a delegation by the
 * scopes it delegates (found 2026-11-29) replaces an earlier pack's rule where nobody edited it.
 */
describe('Upgrading a store seeded before delegations bounded token exchange', function () {
  it('is replaced with the current pack when still as an earlier pack seeded it, and left alone when edited', async function () {
    const before = fixture('token-exchange-before-delegation-scopes.rego');
    expect(TOKEN_EXCHANGE_NOW).not.to.equal(before);
    expect(await tokenExchangeRuleMigratedFrom(4, before)).to.equal(TOKEN_EXCHANGE_NOW);
    const edited = `${before}\n# an operator's note\n`;
    expect(await tokenExchangeRuleMigratedFrom(4, edited)).to.equal(edited);
  });
});

/**
 * Schema step 7: the token exchange rule that refuses authorization_details on an exchange resting
 * on a delegation (found 2026-11-29) replaces the rule step 5 left where nobody edited it.
 */
describe('Upgrading a store whose token exchange rule passed authorization details on a delegation', function () {
  it('is replaced with the current pack when still as step 5 left it, and left alone when edited', async function () {
    const before = fixture('token-exchange-before-delegation-details.rego');
    expect(TOKEN_EXCHANGE_NOW).not.to.equal(before);
    expect(await tokenExchangeRuleMigratedFrom(6, before)).to.equal(TOKEN_EXCHANGE_NOW);
    const edited = `${before}\n# an operator's note\n`;
    expect(await tokenExchangeRuleMigratedFrom(6, edited)).to.equal(edited);
  });
});

/**
 * Schema step 8: the token exchange rule that keeps a client's own token within what the client may
 * hold for the target (found 2026-11-30) replaces the rule step 7 left where nobody edited it.
 */
describe("Upgrading a store whose token exchange rule carried a client's entitlements to another resource type", function () {
  it('is replaced with the current pack when still as step 7 left it, and left alone when edited', async function () {
    const before = fixture('token-exchange-before-own-token-ceiling.rego');
    expect(TOKEN_EXCHANGE_NOW).not.to.equal(before);
    expect(await tokenExchangeRuleMigratedFrom(7, before)).to.equal(TOKEN_EXCHANGE_NOW);
    const edited = `${before}\n# an operator's note\n`;
    expect(await tokenExchangeRuleMigratedFrom(7, edited)).to.equal(edited);
  });
});

/**
 * Schema step 9: the registration rule that finds a software_id in the denylist in any letter case
 * (found 2026-11-30) replaces an earlier pack's rule where nobody edited it.
 */
describe("Upgrading a store whose registration rule compared the denylist's software_ids letter for letter", function () {
  const REGISTER_RULE = 'arbiter/register/register.rego';
  const now = readFileSync(join(POLICY_PACK_DIR, REGISTER_RULE), 'utf8');

  it('is replaced with the current pack when still as an earlier pack seeded it, and left alone when edited', async function () {
    const before = fixture('register-before-denylist-case.rego');
    expect(now).not.to.equal(before);
    expect(await packRuleMigratedFrom(REGISTER_RULE, 8, before)).to.equal(now);
    const edited = `${before}\n# an operator's note\n`;
    expect(await packRuleMigratedFrom(REGISTER_RULE, 8, edited)).to.equal(edited);
  });
});

/**
 * Schema step 10: the helpers that take the type a resource names before a caller's resource_type
 * hint (found 2026-11-30) replace an earlier pack's where nobody edited them.
 */
describe("Upgrading a store whose helpers let a caller's resource_type hint replace the type a resource names", function () {
  const LIB_RULE = 'arbiter/lib/lib.rego';
  const now = readFileSync(join(POLICY_PACK_DIR, LIB_RULE), 'utf8');

  it('is replaced with the current pack when still as an earlier pack seeded it, and left alone when edited', async function () {
    const before = fixture('lib-before-resource-type-hint.rego');
    expect(now).not.to.equal(before);
    expect(await packRuleMigratedFrom(LIB_RULE, 9, before)).to.equal(now);
    const edited = `${before}\n# an operator's note\n`;
    expect(await packRuleMigratedFrom(LIB_RULE, 9, edited)).to.equal(edited);
  });
});
