import { readdir, readFile } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { projectPath } from '../../config/index.js';
import type { Unavailable } from '../../http/errors.js';

export interface ConsoleAsset {
  body: Buffer;
  type: string;
}

/**
 * Where `npm run build` (scripts/build-console.ts) writes the console: the page, its icon and the
 * browser bundle with its stylesheet. The same folder for the sources (tsx) and the build, so the
 * server never compiles anything at run time.
 */
export const CONSOLE_BUILD_DIR = projectPath('dist', 'console');

/** The page every other file hangs off: a folder without it is no built console. */
const PAGE = 'index.html';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The console was not built (a checkout where `npm run build` never ran): a 503 that says so. */
export class ConsoleNotBuiltError extends Error implements Unavailable {
  readonly status = 503;
  readonly error = 'temporarily_unavailable';
  readonly dependency = 'console';
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'ConsoleNotBuiltError';
  }
}

/** The built console's files by name, read once from `dir` (the build's folder unless a test names another). */
export async function readConsole(dir: string = CONSOLE_BUILD_DIR): Promise<Map<string, ConsoleAsset>> {
  const names = await readdir(dir).catch((error: NodeJS.ErrnoException): string[] => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  if (!names.includes(PAGE))
    throw new ConsoleNotBuiltError(`the console is not built (no ${join(dir, PAGE)}): run \`npm run build\``);
  const assets = new Map<string, ConsoleAsset>();
  for (const name of names)
    assets.set(name, {
      body: await readFile(join(dir, name)),
      type: TYPES[extname(name)] ?? 'application/octet-stream',
    });
  return assets;
}
