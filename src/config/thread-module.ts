/**
 * Which module a thread loads: the file of that name beside the module starting it, `.js` in the
 * build; under tsx (the sources), the `.ts` file with tsx's loader in the thread, unless compiled
 * modules were chosen for threads (`runThreadsCompiled`). The policy threads (decision, sandbox)
 * start at such a module; SQLite's checkpointer requires one (`threadRequirePath`).
 */
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { projectPath } from './paths.js';

/** The build's src/ folder for threads started from the sources, or null: threads load what their starter is. */
let compiledSources: string | null = null;

/**
 * Threads started from the sources load the build's modules under `distSrc` (dist/src) instead:
 * a thread under tsx transforms its whole module graph as it starts (about twice the CPU of the
 * compiled one). The test support sets it when dist/ is as new as the sources (test/support/entry-point.ts), so that
 * the threads of a test run's many servers load fast; a server never does. Returns the choice before.
 */
export function runThreadsCompiled(distSrc: string | null): string | null {
  const before = compiledSources;
  compiledSources = distSrc;
  return before;
}

export function threadModule(starterUrl: string, name: string): { module: URL; execArgv: string[] } {
  if (!starterUrl.endsWith('.ts') || compiledSources !== null)
    return { module: pathToFileURL(threadRequirePath(starterUrl, name)), execArgv: [] };
  return {
    module: new URL(`./${name}.ts`, starterUrl),
    execArgv: ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href],
  };
}

/**
 * The file a thread started from a CommonJS text (`eval`) requires for `name` beside `starterUrl`:
 * `.js` in the build, or the build's copy when threads run compiled; else the `.ts` file, which
 * Node loads by stripping its types (its TypeScript stripper costs a thread about 60 ms of CPU).
 */
export function threadRequirePath(starterUrl: string, name: string): string {
  const beside = fileURLToPath(new URL(`./${name}.js`, starterUrl));
  if (!starterUrl.endsWith('.ts')) return beside;
  if (compiledSources !== null) return join(compiledSources, relative(projectPath('src'), beside));
  return fileURLToPath(new URL(`./${name}.ts`, starterUrl));
}
