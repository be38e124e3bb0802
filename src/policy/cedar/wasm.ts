import { createRequire } from 'node:module';
import type { DetailedError } from '@cedar-policy/cedar-wasm/nodejs';

/** The Cedar wasm bindings for Node (a CommonJS module, hence require). */
export const cedar = createRequire(import.meta.url)(
  '@cedar-policy/cedar-wasm/nodejs',
) as typeof import('@cedar-policy/cedar-wasm/nodejs');

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
