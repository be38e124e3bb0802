import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The checkout (or image) root: the nearest folder above this module holding package.json.
 * Found by walking up rather than by a fixed `../..`, because the same module runs from
 * `src/config/` (tsx) and from `dist/src/config/` (the build), one level deeper.
 */
function findProjectRoot(start: string): string {
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${start}`);
  }
}

export const PROJECT_ROOT = findProjectRoot(dirname(fileURLToPath(import.meta.url)));

/** A path inside the project: `projectPath('policies')`, `projectPath('.bin', 'opa')`. */
export function projectPath(...segments: string[]): string {
  return join(PROJECT_ROOT, ...segments);
}
