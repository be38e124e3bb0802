import { pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { projectPath, runThreadsCompiled, threadModule, threadRequirePath } from '../../../src/config/index.js';
import { compiledIsFresh } from '../../support/entry-point.js';

/** The URL a module of the project has, in the sources or in the build. */
const urlOf = (...segments: string[]) => pathToFileURL(projectPath(...segments)).href;

describe('unit: which module a thread loads (config/thread-module.ts)', () => {
  // The suite's own choice (test/support/root.ts) is given back after each test.
  let suiteChoice: string | null = null;
  beforeEach(() => {
    suiteChoice = runThreadsCompiled(null);
  });
  afterEach(() => runThreadsCompiled(suiteChoice));

  // Made by the root hook (test/support/root.ts) in its copy of src/config: this test file sees
  // it only if mocha loaded the hook and the test files as one module graph.
  it("is the suite's choice in the test files' copy: the build's threads while dist/ is fresh, else none", () => {
    expect(suiteChoice).to.equal(compiledIsFresh() ? projectPath('dist', 'src') : null);
  });

  it('requires the build beside a built starter, the .ts source beside a source one', () => {
    expect(threadRequirePath(urlOf('dist', 'adapters', 'sqlite', 'checkpointer.js'), 'files')).to.equal(
      projectPath('dist', 'adapters', 'sqlite', 'files.js'),
    );
    expect(threadRequirePath(urlOf('adapters', 'sqlite', 'checkpointer.ts'), 'files')).to.equal(
      projectPath('adapters', 'sqlite', 'files.ts'),
    );
  });

  it("requires the build's copy from the sources once threads run compiled, outside src/ too (adapters/)", () => {
    runThreadsCompiled(projectPath('dist', 'src'));
    expect(threadRequirePath(urlOf('adapters', 'sqlite', 'checkpointer.ts'), 'files')).to.equal(
      projectPath('dist', 'adapters', 'sqlite', 'files.js'),
    );
    expect(threadModule(urlOf('src', 'policy', 'live', 'index.ts'), 'thread')).to.deep.equal({
      module: pathToFileURL(projectPath('dist', 'src', 'policy', 'live', 'thread.js')),
      execArgv: [],
    });
  });
});
