import type { Attributes } from '@opentelemetry/api';
import { ATTR_DB_COLLECTION_NAME, ATTR_DB_OPERATION_NAME } from '@opentelemetry/semantic-conventions';
import type {
  CollectionSpec,
  Filter,
  FindOptions,
  Store,
  StoredDoc,
  TenantCollection,
  TextSearch,
} from '../store/index.js';

/** Marks the objects a Tracing wrapped, so that a test can tell that a server without tracing has none. */
export const TRACED = Symbol('arbiter.traced');

/** Where both adapters keep Store.addToWindow's counters. */
const WINDOW_COUNTERS = 'window_counters';

/** Runs `work` in a child span named `name` (when there is a traced request to be the child of). */
export type InSpan = <T>(name: string, attributes: Attributes, work: () => Promise<T>) => Promise<T>;

/**
 * The store with a span per call, named as OpenTelemetry's database conventions say
 * (`find clients`: the operation, then the collection), with the tenant. Filters, ids and
 * documents are left out: they hold subjects, client ids and token digests.
 */
export function tracedStore(store: Store, inSpan: InSpan): Store {
  const storeCall = <T>(operation: string, work: () => Promise<T>) =>
    inSpan(operation, { [ATTR_DB_OPERATION_NAME]: operation }, work);
  const counterCall = <T>(operation: string, work: () => Promise<T>) =>
    inSpan(
      `${operation} ${WINDOW_COUNTERS}`,
      { [ATTR_DB_OPERATION_NAME]: operation, [ATTR_DB_COLLECTION_NAME]: WINDOW_COUNTERS },
      work,
    );
  const calls: Partial<Store> & { [TRACED]: true } = {
    [TRACED]: true,
    collection: <T extends StoredDoc = StoredDoc>(spec: CollectionSpec | string, tenant?: string) =>
      new TracedCollection<T>(store.collection<T>(spec, tenant), typeof spec === 'string' ? spec : spec.name, inSpan),
    nextSequence: (name, count) => storeCall('nextSequence', () => store.nextSequence(name, count)),
    // The auth-failure throttle's counters, named after their table (their keys name addresses and credentials: left out).
    addToWindow: (key, windowMs, amount) => counterCall('addToWindow', () => store.addToWindow(key, windowMs, amount)),
    readWindows: (keys) => counterCall('readWindows', () => store.readWindows(keys)),
    purgeExpired: () => storeCall('purgeExpired', () => store.purgeExpired()),
  };
  // Everything else (ping, onWrite, backup, close, what a store adds) is the store's own, called on it.
  return new Proxy(store, {
    get(target, property) {
      if (Object.hasOwn(calls, property)) return calls[property as keyof typeof calls];
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
    has: (target, property) => Object.hasOwn(calls, property) || Reflect.has(target, property),
  });
}

/** A class rather than closures: a collection is asked for on every request, and this is one small object. */
class TracedCollection<T extends StoredDoc> implements TenantCollection<T> {
  constructor(
    private readonly inner: TenantCollection<T>,
    private readonly name: string,
    private readonly inSpan: InSpan,
  ) {}

  get tenant(): string {
    return this.inner.tenant;
  }

  private call<R>(operation: string, work: () => Promise<R>): Promise<R> {
    return this.inSpan(
      `${operation} ${this.name}`,
      {
        [ATTR_DB_OPERATION_NAME]: operation,
        [ATTR_DB_COLLECTION_NAME]: this.name,
        'arbiter.tenant': this.inner.tenant,
      },
      work,
    );
  }

  insert(doc: T) {
    return this.call('insert', () => this.inner.insert(doc));
  }
  insertMany(docs: readonly T[]) {
    return this.call('insertMany', () => this.inner.insertMany(docs));
  }
  upsert(doc: T) {
    return this.call('upsert', () => this.inner.upsert(doc));
  }
  get(id: string | number) {
    return this.call('get', () => this.inner.get(id));
  }
  getMany(ids: readonly (string | number)[]) {
    return this.call('getMany', () => this.inner.getMany(ids));
  }
  findOne(filter: Filter) {
    return this.call('findOne', () => this.inner.findOne(filter));
  }
  find(filter?: Filter, options?: FindOptions) {
    return this.call('find', () => this.inner.find(filter, options));
  }
  count(filter?: Filter, search?: TextSearch, atMost?: number) {
    return this.call('count', () => this.inner.count(filter, search, atMost));
  }
  update(id: string | number, fields: Partial<T>, onlyIf?: Filter) {
    return this.call('update', () => this.inner.update(id, fields, onlyIf));
  }
  delete(id: string | number) {
    return this.call('delete', () => this.inner.delete(id));
  }
  deleteMany(filter: Filter, limit?: number, except?: Filter) {
    return this.call('deleteMany', () => this.inner.deleteMany(filter, limit, except));
  }
  deleteBefore(field: string, bound: string | number, limit?: number) {
    return this.call('deleteBefore', () => this.inner.deleteBefore(field, bound, limit));
  }
}
