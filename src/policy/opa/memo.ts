/**
 * What an OPA command says of a bundle depends on nothing but the bundle's bytes, the binary
 * (whose capabilities file binary.ts also reads once per path) and what else the command is
 * given: so the same bundle is compiled and checked once per process, not once per caller. A
 * write's trial checks the very bundle that the bundle route then checks before serving it and
 * that the in-process engine compiles to Wasm; every server of a test run starts from the same
 * default pack. Kept in memory only (nothing on disk to tamper with), bounded in entries and bytes.
 */
import { createHash } from 'node:crypto';
import { policySandboxLimits } from './sandbox.js';

/** A digest of every part, each with its length, so that no two lists of parts give the same key. */
export function contentKey(...parts: (string | Uint8Array)[]): string {
  const hash = createHash('sha256');
  for (const part of parts) {
    const bytes = typeof part === 'string' ? Buffer.from(part, 'utf8') : part;
    hash.update(`${bytes.length}:`).update(bytes);
  }
  return hash.digest('hex');
}

/**
 * The key of what `command` of `opaBinary` says of `parts`, under this process's OPA limits (time,
 * memory, decision budget: a run that finished under one limit may be stopped under a lower one).
 */
export function opaOutcomeKey(command: string, opaBinary: string, ...parts: (string | Uint8Array)[]): string {
  return contentKey(command, opaBinary, JSON.stringify(policySandboxLimits()), ...parts);
}

/**
 * Outcomes by content key, the least recently used dropped past `maxEntries` or `maxBytes`. Only
 * outcomes are kept, not computations under way: callers that ask at once each run theirs, so
 * that OPA's concurrency cap (POLICY_OPA_CONCURRENCY) and time limit apply to each as before. A
 * computation that throws (OPA busy, killed at a limit, not found) is not kept, nor is an outcome
 * `keep` declines.
 */
export class ContentMemo<T> {
  private readonly entries = new Map<string, { value: T; bytes: number }>();
  private bytes = 0;

  constructor(private readonly limits: { maxEntries: number; maxBytes: number; sizeOf: (value: T) => number }) {}

  async get(key: string, compute: () => Promise<T>, keep: (value: T) => boolean = () => true): Promise<T> {
    const known = this.entries.get(key);
    if (known) {
      // Most recently used last: a Map iterates in insertion order.
      this.entries.delete(key);
      this.entries.set(key, known);
      return known.value;
    }
    const value = await compute();
    if (keep(value) && !this.entries.has(key)) {
      const bytes = this.limits.sizeOf(value);
      this.entries.set(key, { value, bytes });
      this.bytes += bytes;
      this.evict();
    }
    return value;
  }

  private evict(): void {
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= this.limits.maxEntries && this.bytes <= this.limits.maxBytes) return;
      this.entries.delete(key);
      this.bytes -= entry.bytes;
    }
  }
}
