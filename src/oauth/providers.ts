import type Koa from 'koa';
import type { Middleware } from 'koa';
import type { ArbiterMiddleware } from './state.js';
import mount from 'koa-mount';
import { LRUCache, type Perf } from 'lru-cache';
import type Provider from 'oidc-provider';
import type { PolicyVocabulary } from '../policy/index.js';
import type { Tenant } from '../tenancy/index.js';
import type { LoadedSecrets, ProviderSecrets, TenantKeys } from './keys.js';

interface MountedProvider {
  provider: Provider;
  middleware: Middleware;
}

/**
 * One oidc-provider instance per tenant and issuer, created on first use: the issuer is fixed per
 * instance, and each instance sees only its tenant's view of the store and signs with its
 * tenant's own keys. A tenant named by X-Tenant-Id is served under the shared issuer (basePath
 * ''), one reached at /t/<tenant> under its own (basePath `/t/<tenant>`): two instances over the
 * same records and keys. At most `maxTenants` instances, and `maxTenants` tenants' keys, are kept
 * (least recently used go first), and none that no request used for `idleMs`, so that the memory
 * of tenants gone quiet returns (about 100 KB of heap per instance, measured with
 * bench/tenant-cost.ts; 1,000 built tenants: ~130 MB of RSS over one, bench/curve.ts); an
 * evicted tenant's provider is simply built again (a few ms of CPU), since everything it needs
 * lives in the store.
 *
 * A tenant's keys are read from the store once per revision (not per request), which is why a
 * request's provider is made ready by `prepare()` before any step asks for it: the steps ask
 * synchronously, and get the instance prepared for their request even if the cache has since
 * let it go.
 *
 * What policy data defines for the protocol (RAR types, scopes: the policy vocabulary) is
 * construction-time configuration: an instance built for an older policy revision than the
 * current one is built again by the next request, as one whose keys were rotated is (`refresh`),
 * so that a policy change is in force as soon as the policy engine sees it (within a second), and
 * no request changes a provider's configuration. Requests under way finish on the instance they
 * were prepared with.
 */
export class TenantProviders {
  /** By tenant and issuer; each with the store tenant, the revision of the keys and the policy revision it was built with. */
  private readonly mounted: LRUCache<
    string,
    MountedProvider & { tenant: string; revision: number; vocabularyDigest: string }
  >;
  /** By store tenant: its keys being read or read, with their revision. */
  private readonly keys: LRUCache<string, Promise<LoadedSecrets>>;
  /** The instance each request in flight was prepared with (by its ctx.state.tenant). */
  private readonly prepared = new WeakMap<Tenant, MountedProvider>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly create: (
      tenant: string,
      basePath: string,
      secrets: ProviderSecrets,
      vocabulary: PolicyVocabulary,
    ) => Provider,
    private readonly source: TenantKeys,
    private readonly vocabulary: () => Promise<PolicyVocabulary>,
    maxTenants: number,
    /** `clock`: the caches' time (a test's). */
    { idleMs, clock }: { idleMs: number; clock?: Perf },
  ) {
    // Idle entries are not returned (their age is checked on each get) and are dropped by one
    // sweep on a timer, so the memory of tenants gone quiet returns without a request. Not
    // lru-cache's ttlAutopurge: with updateAgeOnGet it re-arms a timer per entry on every get,
    // i.e. on every request, and each timer holds the async context of the request that armed it
    // (its state, its client, its tokens) until that tenant's next request: with 1,000 tenants,
    // 2,000 requests' state kept alive and promoted to the old generation.
    const idle = {
      ttl: idleMs,
      updateAgeOnGet: true,
      ...(clock ? { perf: clock, ttlResolution: 0 } : { ttlResolution: AGE_RESOLUTION_MS }),
    };
    this.mounted = new LRUCache({ max: maxTenants, ...idle });
    this.keys = new LRUCache({ max: maxTenants, ...idle });
    this.sweeper = setInterval(() => this.sweep(), sweepEvery(idleMs));
    this.sweeper.unref();
  }

  /** Drops the instances and keys no request used for the idle time. */
  sweep(): void {
    this.mounted.purgeStale();
    this.keys.purgeStale();
  }

  /** Stops the idle sweep (the server's close). */
  close(): void {
    clearInterval(this.sweeper);
  }

  /** Makes the provider of `ctx.state.tenant` ready (its keys read when this node has none of them). */
  prepare(): ArbiterMiddleware {
    return async (ctx, next) => {
      this.prepared.set(ctx.state.tenant, await this.ready(ctx.state.tenant));
      await next();
    };
  }

  /**
   * Forgets the tenants whose keys were rotated in the store since this node read them: each
   * one's next request builds its providers again with its current keys. Requests under way
   * finish on the instance they have. Answers the tenants forgotten.
   */
  async refresh(): Promise<string[]> {
    const held = new Map<string, number[]>();
    const hold = (tenant: string, revision: number) => held.set(tenant, [...(held.get(tenant) ?? []), revision]);
    for (const { tenant, revision } of this.mounted.values()) hold(tenant, revision);
    for (const [tenant, reading] of [...this.keys.entries()]) {
      const read = await reading.catch(() => null);
      if (read) hold(tenant, read.revision);
    }
    const rotated: string[] = [];
    for (const [tenant, revisions] of held) {
      const current = await this.source.revision(tenant);
      if (revisions.every((revision) => revision === current)) continue;
      this.forget(tenant);
      rotated.push(tenant);
    }
    return rotated;
  }

  /** The provider of the tenant as the request named it (by X-Tenant-Id, or by its path), made ready by `prepare()`. */
  provider(tenant: Tenant): Provider {
    return this.entry(tenant).provider;
  }

  /** The provider of a tenant outside its protocol requests (the Admin API's logout notices), made ready. */
  async providerFor(tenant: Tenant): Promise<Provider> {
    return (await this.ready(tenant)).provider;
  }

  /** Hands the request to the provider of `ctx.state.tenant`. */
  middleware(): ArbiterMiddleware {
    return (ctx, next) => this.entry(ctx.state.tenant).middleware(ctx, next);
  }

  private entry(tenant: Tenant): MountedProvider {
    const entry = this.prepared.get(tenant) ?? this.mounted.get(keyOf(tenant));
    if (!entry) throw new Error(`the provider of tenant ${tenant.name} was asked for before prepare() made it ready`);
    return entry;
  }

  private async ready(tenant: Tenant): Promise<MountedProvider> {
    const key = keyOf(tenant);
    const vocabulary = await this.vocabulary();
    const cached = this.mounted.get(key);
    if (cached?.vocabularyDigest === vocabulary.digest) return cached;
    const reading = this.keysOf(tenant.name);
    const { secrets, revision } = await reading;
    const builtMeanwhile = this.mounted.get(key);
    if (builtMeanwhile?.vocabularyDigest === vocabulary.digest) return builtMeanwhile;
    const provider = this.create(tenant.name, tenant.path ?? '', secrets, vocabulary);
    // A v9 Provider is itself the Koa application to mount.
    const middleware = mount(provider as unknown as Koa) as Middleware;
    const entry = { provider, middleware, tenant: tenant.name, revision, vocabularyDigest: vocabulary.digest };
    // Keys rotated while they were read: this request uses them, the next one builds again.
    if (this.keys.get(tenant.name) === reading) this.mounted.set(key, entry);
    return entry;
  }

  /** The tenant's keys, read once (concurrent first requests share the read; a failed read is not kept). */
  private keysOf(tenant: string): Promise<LoadedSecrets> {
    let reading = this.keys.get(tenant);
    if (!reading) {
      const started = this.source.load(tenant);
      reading = started;
      this.keys.set(tenant, started);
      started.catch(() => {
        if (this.keys.get(tenant) === started) this.keys.delete(tenant);
      });
    }
    return reading;
  }

  private forget(tenant: string): void {
    this.keys.delete(tenant);
    for (const [key, entry] of [...this.mounted.entries()]) if (entry.tenant === tenant) this.mounted.delete(key);
  }
}

const keyOf = ({ name, path = '' }: Tenant) => `${name} ${path}`;

/** How precisely an entry's idle time is measured (lru-cache reads the clock at most this often). */
const AGE_RESOLUTION_MS = 1000;

/** The idle sweep's period: a tenth of the idle time, between 1 s and 60 s (memory returns within the idle time plus this). */
const sweepEvery = (idleMs: number) => Math.min(60_000, Math.max(1000, Math.round(idleMs / 10)));
