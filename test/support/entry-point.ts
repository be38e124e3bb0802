import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { projectPath } from '../../src/config/index.js';
import { withServerNodeFlags } from '../../src/workers/node-flags.js';

/** What the build compiles, and how (scripts/start.sh's list): dist/ older than any of them is stale. */
const BUILD_INPUTS = [
  'src',
  'adapters',
  'scripts/build.sh',
  'scripts/build-console.ts',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
];

let fresh: boolean | undefined;

/** True when dist/ was built after every build input last changed (checked once per run). */
export function compiledIsFresh(): boolean {
  fresh ??= distIsFresh();
  return fresh;
}

/**
 * node's arguments for the server (`main`) or the command line (`cli/main`) as a process of its
 * own: the compiled dist/ when it is at least as new as every build input (`npm test` builds it
 * before mocha: scripts/test.sh), as `npm start` and `npx arbiter` run it; else the sources through
 * tsx. A process under tsx transforms the whole server as it loads: about twice the CPU of the
 * compiled one, in each CLI command and each server process a test starts.
 */
export function entryPoint(entry: 'main' | 'cli/main', nodeOptions = ''): string[] {
  // A server with the Node.js options npm start gives it (src/workers/node-flags.ts), less those its NODE_OPTIONS sets.
  const flags = entry === 'main' ? withServerNodeFlags([], nodeOptions) : [];
  return compiledIsFresh()
    ? ['--enable-source-maps', ...flags, projectPath('dist', 'src', `${entry}.js`)]
    : [...flags, '--import', 'tsx', projectPath('src', `${entry}.ts`)];
}

function distIsFresh(): boolean {
  const built = projectPath('dist', '.built');
  if (!existsSync(built)) return false;
  const builtAt = statSync(built).mtimeMs;
  return BUILD_INPUTS.every((input) => !newerThan(projectPath(input), builtAt));
}

/** True when `path`, or anything under it, was modified after `time`. */
function newerThan(path: string, time: number): boolean {
  if (!existsSync(path)) return false;
  const stat = statSync(path);
  if (stat.mtimeMs > time) return true;
  if (!stat.isDirectory()) return false;
  return readdirSync(path).some((name) => newerThan(join(path, name), time));
}
