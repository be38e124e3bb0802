/**
 * Part of `npm run build` (scripts/build.sh): bundles the operators' console into dist/console/,
 * the folder the server serves it from (src/admin/console/assets.ts). esbuild makes one browser
 * bundle of app/main.ts, with its stylesheet and the Admin collections' schemas compiled in (so
 * the forms follow src/catalog/collections.ts), from npm packages only: no CDN. The page and its
 * icon are copied as they are. test/support/root.ts runs it too, so a test run from the sources
 * serves the console of those sources.
 */
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { projectPath } from '../src/config/index.js';
import { CONSOLE_BUILD_DIR } from '../src/admin/console/assets.js';

const SOURCES = projectPath('src', 'admin', 'console');

/** Files served as they are, next to the bundle. */
const STATIC_FILES = ['index.html', 'icon.svg'];

/**
 * Writes the console into a fresh folder beside `outDir`, then puts it in place with two renames,
 * so that a server reading `outDir` (or a second build at once) never sees half a console (at
 * most, for an instant, none: the server reads it again at its next request).
 */
export async function buildConsole(outDir: string = CONSOLE_BUILD_DIR): Promise<void> {
  const staging = `${outDir}.${randomBytes(6).toString('hex')}`;
  await mkdir(dirname(outDir), { recursive: true });
  try {
    await build({
      entryPoints: [join(SOURCES, 'app', 'main.ts')],
      entryNames: 'console',
      bundle: true,
      outdir: staging,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      minify: true,
      legalComments: 'none',
      logLevel: 'warning',
    });
    for (const name of STATIC_FILES) await copyFile(join(SOURCES, name), join(staging, name));
    await swapIn(staging, outDir);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** Puts `staging` at `outDir`; a build that finished meanwhile (another test run) is replaced in turn. */
async function swapIn(staging: string, outDir: string): Promise<void> {
  const previous = `${staging}.old`;
  for (let attempt = 1; ; attempt += 1) {
    await rename(outDir, previous).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
    await rm(previous, { recursive: true, force: true });
    try {
      await rename(staging, outDir);
      return;
    } catch (error) {
      const taken = ['ENOTEMPTY', 'EEXIST'].includes((error as NodeJS.ErrnoException).code ?? '');
      if (!taken || attempt === 5) throw error;
    }
  }
}

// No top-level await: the test suite's root hook (test/support/root.ts) imports this module, and
// mocha requires that hook; a top-level await would make it an ES module of its own, with copies
// of test/support and src/ apart from those of the test files (test/unit/config/thread-module.test.ts).
if (process.argv[1] === fileURLToPath(import.meta.url))
  buildConsole().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
