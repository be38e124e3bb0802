import { createRequire } from 'node:module';
import type { DetailedError } from '@cedar-policy/cedar-wasm/nodejs';

type CedarBindings = typeof import('@cedar-policy/cedar-wasm/nodejs');
let bindings: CedarBindings | undefined;

/**
 * The Cedar wasm bindings for Node (a CommonJS module, hence require), loaded at the first use:
 * loading compiles a 4 MB Wasm module (about 20 ms of CPU and its code in memory), which a
 * process or thread whose policy has no Cedar rule (the CLI, most servers' threads) never needs.
 */
export function cedar(): CedarBindings {
  bindings ??= createRequire(import.meta.url)('@cedar-policy/cedar-wasm/nodejs') as CedarBindings;
  return bindings;
}

/** Cedar's error text with its hint and, when the source is given, the line:column it points at. */
export function formatCedarErrors(errors: DetailedError[], source?: string): string {
  return errors
    .map((error) => {
      const offset = error.sourceLocations?.[0]?.start;
      const where = source !== undefined && offset !== undefined ? ` at ${lineAndColumn(source, offset)}` : '';
      return `${error.message}${where}${error.help ? ` (${error.help})` : ''}`;
    })
    .join('; ');
}

function lineAndColumn(source: string, offset: number): string {
  const before = source.slice(0, offset).split('\n');
  return `${before.length}:${before.at(-1)!.length + 1}`;
}
