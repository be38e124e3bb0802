// The parts of oidc-provider 9.13 the baseline (baseline.ts) uses that are not in its typed
// public API: its own in-memory adapter class and the LRU store it keeps artefacts in.
declare module 'oidc-provider/lib/adapters/memory_adapter.js' {
  import type { Adapter } from 'oidc-provider';
  /** `store` is an LRU (lru.js); the default instance uses one of 1,000 entries. */
  const MemoryAdapter: new (model: string, store?: unknown, clockTolerance?: number) => Adapter;
  export default MemoryAdapter;
}

declare module 'oidc-provider/lib/helpers/lru.js' {
  export default class LRU {
    constructor(options: { maxSize: number });
  }
}
