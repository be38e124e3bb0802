import { StoreUnavailableError, type Store } from '../../src/store/index.js';

/**
 * Runs `work` while the first `find` of the collection `name` on `store` (the real store object of
 * an in-process test server) fails as a store that cannot answer would, then puts the store back:
 * a fault in the middle of a request, after what it did before that read.
 */
export async function withOneFailedFind<T>(store: Store, name: string, work: () => Promise<T>): Promise<T> {
  const collection = store.collection.bind(store);
  let faults = 1;
  store.collection = ((spec: Parameters<typeof collection>[0], tenant?: string) => {
    const opened = collection(spec, tenant);
    const opening = typeof spec === 'string' ? spec : spec.name;
    if (opening !== name || faults === 0) return opened;
    return Object.assign(Object.create(opened) as typeof opened, {
      find: async () => {
        faults -= 1;
        throw new StoreUnavailableError('a fault injected by the test');
      },
    });
  }) as typeof store.collection;
  try {
    return await work();
  } finally {
    store.collection = collection;
  }
}
