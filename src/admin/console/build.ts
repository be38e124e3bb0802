import { readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { build } from 'esbuild';
import { projectPath } from '../../config/index.js';

export interface ConsoleAsset {
  body: Buffer;
  type: string;
}

/** The console's sources: read from the checkout, so the compiled server (dist/) serves the same files. */
const HERE = projectPath('src', 'admin', 'console');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** Files served as they are, next to the bundle. */
const STATIC_FILES = ['index.html', 'icon.svg'];

/**
 * The console's files by name: the page, its icon, and the browser bundle esbuild makes from
 * app/main.ts (with its stylesheet and the Admin collections' schemas compiled in, so that the
 * forms follow src/catalog/collections.ts). Built in memory, from npm packages only: no CDN, no
 * build step a fresh clone could miss.
 */
export async function buildConsole(): Promise<Map<string, ConsoleAsset>> {
  const result = await build({
    entryPoints: [join(HERE, 'app', 'main.ts')],
    entryNames: 'console',
    bundle: true,
    write: false,
    outdir: join(HERE, 'out'),
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  const assets = new Map<string, ConsoleAsset>();
  for (const file of result.outputFiles) assets.set(basename(file.path), asset(file.path, Buffer.from(file.contents)));
  for (const name of STATIC_FILES) assets.set(name, asset(name, await readFile(join(HERE, name))));
  return assets;
}

function asset(name: string, body: Buffer): ConsoleAsset {
  const extension = name.slice(name.lastIndexOf('.'));
  return { body, type: TYPES[extension] ?? 'application/octet-stream' };
}
