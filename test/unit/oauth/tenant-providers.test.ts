import { expect } from 'chai';
import { AsyncLocalStorage } from 'node:async_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type Provider from 'oidc-provider';
import type { LoadedSecrets, ProviderSecrets, TenantKeys } from '../../../src/oauth/keys.js';
import { TenantProviders } from '../../../src/oauth/providers.js';
import type { ArbiterContext } from '../../../src/oauth/state.js';
import type { PolicyVocabulary } from '../../../src/policy/index.js';
import { tenantOf, type Tenant } from '../../../src/tenancy/index.js';

/** Keys in a map instead of the store: each tenant's revision, and how often each was read. */
class StubKeys implements TenantKeys {
  readonly revisions = new Map<string, number>();
  readonly reads = new Map<string, number>();

  async load(tenant: string): Promise<LoadedSecrets> {
    this.reads.set(tenant, (this.reads.get(tenant) ?? 0) + 1);
    await new Promise((resolve) => setImmediate(resolve));
    const revision = this.revisions.get(tenant) ?? 0;
    return { revision, secrets: { jwks: { keys: [{ kid: `${tenant}-${revision}` }] }, cookieKeys: [] } };
  }

  async revision(tenant: string): Promise<number | null> {
    return this.revisions.get(tenant) ?? 0;
  }
}

/** A stand-in provider: the kid it was built with (koa-mount takes an object with `middleware`). */
const stubProvider = (_tenant: string, _basePath: string, secrets: ProviderSecrets, built: PolicyVocabulary) =>
  ({ kid: secrets.jwks.keys[0]!.kid, policyRevision: built.revision, middleware: [] }) as unknown as Provider;
const IDLE_MS = 60_000;
const kidOf = (provider: Provider) => (provider as unknown as { kid: string }).kid;
const policyRevisionOf = (provider: Provider) => (provider as unknown as { policyRevision: string }).policyRevision;

/** The policy vocabulary the providers are built with: its revision moves on when a test says so. */
let vocabulary: PolicyVocabulary = { revision: 'r1', digest: 'd1', authorizationDetailsTypes: [], scopes: [] };

describe('unit: TenantProviders, one provider per tenant with its own keys (oauth/providers)', function () {
  let keys: StubKeys;
  let providers: TenantProviders;
  /** The caches' clock, moved by the tests (not from 0: lru-cache takes a start of 0 for none). */
  let now = 1_000;
  const clock = { now: () => now };

  beforeEach(function () {
    vocabulary = { revision: 'r1', digest: 'd1', authorizationDetailsTypes: [], scopes: [] };
    keys = new StubKeys();
    providers = new TenantProviders(stubProvider, keys, async () => vocabulary, 2, { idleMs: IDLE_MS, clock });
  });

  /** prepare() for a request of `tenant`, then what its steps get. */
  async function request(tenant: Tenant): Promise<string> {
    let kid = '';
    await providers.prepare()({ state: { tenant } } as unknown as ArbiterContext, async () => {
      kid = kidOf(providers.provider(tenant));
    });
    return kid;
  }

  it("builds each tenant's provider with its own keys, read once per revision however many requests ask", async function () {
    const kids = await Promise.all(['acme', 'acme', 'globex', 'acme'].map((id) => request(tenantOf(id))));
    expect(kids).to.deep.equal(['acme-0', 'acme-0', 'globex-0', 'acme-0']);
    expect(await request({ ...tenantOf('acme'), path: '/t/acme' }), 'the path form: the same keys').to.equal('acme-0');
    expect(Object.fromEntries(keys.reads)).to.deep.equal({ acme: 1, globex: 1 });
  });

  it('rebuilds only the tenants whose keys were rotated, with their new keys', async function () {
    await request(tenantOf('acme'));
    await request(tenantOf('globex'));
    keys.revisions.set('acme', 1);
    expect(await providers.refresh()).to.deep.equal(['acme']);
    expect(await request(tenantOf('acme'))).to.equal('acme-1');
    expect(await request(tenantOf('globex'))).to.equal('globex-0');
    expect(Object.fromEntries(keys.reads)).to.deep.equal({ acme: 2, globex: 1 });
    expect(await providers.refresh(), 'nothing rotated since').to.deep.equal([]);
  });

  it('keeps at most its bound of tenants, yet a request keeps the provider it was prepared with', async function () {
    const acme = tenantOf('acme');
    await providers.prepare()({ state: { tenant: acme } } as unknown as ArbiterContext, async () => {
      // Other tenants push acme out of the cache while its request is under way.
      for (const id of ['globex', 'initech', 'umbrella']) await request(tenantOf(id));
      expect(kidOf(providers.provider(acme))).to.equal('acme-0');
    });
    expect(() => providers.provider(tenantOf('acme')), 'a request never prepared').to.throw(/before prepare/);
  });

  it('keeps the providers when the policy revision moves on but what it says for them does not', async function () {
    const acme = tenantOf('acme');
    let first: Provider | undefined;
    await providers.prepare()({ state: { tenant: acme } } as unknown as ArbiterContext, async () => {
      first = providers.provider(acme);
    });
    vocabulary = { ...vocabulary, revision: 'r2' };
    await providers.prepare()({ state: { tenant: acme } } as unknown as ArbiterContext, async () => {
      expect(providers.provider(acme), 'not built again').to.equal(first);
    });
  });

  it('builds a provider again when the policy vocabulary changes; a request under way keeps the one it has', async function () {
    const acme = tenantOf('acme');
    const built: Provider[] = [];
    const prepared = async (tenant: Tenant) => {
      let provider: Provider | undefined;
      await providers.prepare()({ state: { tenant } } as unknown as ArbiterContext, async () => {
        provider = providers.provider(tenant);
      });
      built.push(provider!);
      return provider!;
    };
    await providers.prepare()({ state: { tenant: acme } } as unknown as ArbiterContext, async () => {
      expect(policyRevisionOf(providers.provider(acme))).to.equal('r1');
      vocabulary = { revision: 'r2', digest: 'd2', authorizationDetailsTypes: ['urn:new'], scopes: [] };
      expect(policyRevisionOf(await prepared(tenantOf('acme'))), 'the next request').to.equal('r2');
      expect(policyRevisionOf(providers.provider(acme)), 'the request under way').to.equal('r1');
    });
    expect(await prepared(tenantOf('acme')), 'built once per revision').to.equal(built[0]);
    expect(Object.fromEntries(keys.reads), 'the keys are not read again').to.deep.equal({ acme: 1 });
  });

  it('lets a tenant go once no request used it for the idle time, and builds it again when one comes', async function () {
    const builds = providersCountingBuilds();
    await request(tenantOf('acme'));
    now += IDLE_MS / 2;
    await request(tenantOf('acme'));
    now += IDLE_MS / 2 + 1;
    expect(await request(tenantOf('acme')), 'used within the idle time: kept').to.equal('acme-0');
    expect([builds.count, keys.reads.get('acme')]).to.deep.equal([1, 1]);
    now += IDLE_MS + 1;
    expect(await request(tenantOf('acme'))).to.equal('acme-0');
    expect([builds.count, keys.reads.get('acme')], 'idle: built again, its keys read again').to.deep.equal([2, 2]);
  });

  it("lets an idle tenant go on its sweep, and keeps no request's async context alive (timers armed by requests)", async function () {
    const builds = providersCountingBuilds();
    // What a request keeps in its async context (its state, its client, its tokens).
    const context = new AsyncLocalStorage<object>();
    const kept = await (async () => {
      const state = { body: 'x'.repeat(1000) };
      await context.run(state, () => request(tenantOf('acme')));
      await context.run(state, () => request(tenantOf('acme')));
      return new WeakRef(state);
    })();
    await new Promise((resolve) => setImmediate(resolve));
    collectGarbage();
    expect(kept.deref(), "the request's context, once it has ended").to.equal(undefined);

    now += IDLE_MS + 1;
    providers.sweep();
    keys.revisions.set('acme', 1);
    expect(await providers.refresh(), 'swept: nothing of acme held any more').to.deep.equal([]);
    expect(await request(tenantOf('acme'))).to.equal('acme-1');
    expect(builds.count).to.equal(2);
  });

  /** Replaces the providers with ones that count their builds, idle after IDLE_MS. */
  function providersCountingBuilds(): { count: number } {
    const builds = { count: 0 };
    providers.close();
    providers = new TenantProviders(
      (...args) => {
        builds.count += 1;
        return stubProvider(...args);
      },
      keys,
      async () => vocabulary,
      2,
      { idleMs: IDLE_MS, clock },
    );
    return builds;
  }

  afterEach(function () {
    providers.close();
  });
});

/** A full garbage collection (gc() made reachable at run time, for this test only). */
function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}
