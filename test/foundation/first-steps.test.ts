import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { promisify } from 'node:util';
import { projectPath } from '../../src/config/index.js';
import { POLICY_EXAMPLES } from '../../src/policy/contract/examples.js';
import { clientCredentials, confidentialClient, policyInForce } from '../support/oauth.js';
import { ADMIN_KEY, readyServer, type TestServer } from '../support/server.js';

const run = promisify(execFile);

/** One command of a README block, and the answer the README shows under it (`# {…}`), if any. */
interface Step {
  command: string;
  shown?: string;
}

/** Marks the end of a command's output in the script's stdout. */
const END_OF_STEP = '@@quick-start-step-ended@@';

/**
 * The README's quick start works as written: every `sh` block of its "Quick start" section that
 * calls curl runs in bash, unchanged but for the host (this server's) and `KEY=…` (the Admin API
 * key comes from the environment), each curl failing on an HTTP error status; each answer the
 * README shows is compared with the real one (`…` stands for anything).
 */
describe('The README quick start', function () {
  let server: TestServer;

  before(async function () {
    // Its own server: the quick start makes the client svc in the default tenant and counts its tokens.
    server = await readyServer();
  });
  after(async function () {
    await server?.close();
  });

  it('has curl blocks, each with answers to check', function () {
    const blocks = quickStartBlocks();
    expect(blocks).to.have.length.at.least(1);
    for (const block of blocks) expect(block.filter((step) => step.shown !== undefined)).to.have.length.at.least(3);
  });

  it('runs every curl of it against a fresh server and gets the answers it shows', async function () {
    for (const block of quickStartBlocks()) {
      const outputs = await runBlock(block, new URL(server.url).host);
      expect(outputs, 'every command ran').to.have.length(block.length);
      block.forEach((step, index) => {
        if (step.shown === undefined) return;
        const answered = outputs[index]!;
        expect(
          shownAnswer(step.shown).test(answered),
          `${step.command}\nshould answer ${step.shown}\nanswered ${answered}`,
        ).to.equal(true);
      });
    }
  });
});

describe("docs/policy.md's worked example through the Admin API", function () {
  let server: TestServer;

  before(async function () {
    // Its own server: the example changes the shared policy data.
    server = await readyServer();
  });
  after(async function () {
    await server?.close();
  });

  it('narrows a scope for one client with one policy data write, and the other clients keep it', async function () {
    const example = POLICY_EXAMPLES.find((candidate) => candidate.name === 'narrow-scope')!;
    const secrets: Record<string, string> = {};
    for (const clientId of ['billing-service', 'reports-service'])
      secrets[clientId] = await confidentialClient(server, clientId, { scopes: ['invoices.read', 'invoices.write'] });
    const scopesOf = async (clientId: string) =>
      (await clientCredentials(server, clientId, secrets[clientId]!, { scope: 'invoices.read invoices.write' })).body
        .scope;
    expect(await scopesOf('billing-service')).to.equal('invoices.read invoices.write');

    for (const [dataKey, payload] of Object.entries(example.data!)) {
      const written = await server.admin('PUT', `/policy-data/by-key?dataKey=${dataKey}`, {
        payload: JSON.stringify(payload),
      });
      expect(written.status, JSON.stringify(written.body)).to.equal(201);
    }
    await policyInForce(server);
    expect(await scopesOf('billing-service')).to.equal('invoices.read');
    expect(await scopesOf('reports-service')).to.equal('invoices.read invoices.write');
    const writeOnly = await clientCredentials(server, 'billing-service', secrets['billing-service']!, {
      scope: 'invoices.write',
    });
    expect(writeOnly.status).to.equal(400);
    expect(writeOnly.body.error).to.equal('invalid_scope');
  });
});

describe('The README and docs/', function () {
  it('link only files inside the repository, every file they link exists, and every section they link too', function () {
    const root = projectPath();
    const documents = [
      'README.md',
      'bench/RESULTS.md',
      ...readdirSync(projectPath('docs'))
        .filter((name) => name.endsWith('.md'))
        .map((name) => `docs/${name}`),
    ];
    const problems: string[] = [];
    for (const document of documents) {
      const text = readFileSync(projectPath(document), 'utf8');
      const linked = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]!);
      const mentioned = [...text.matchAll(/`(\.\.\/[^`\s]+)`/g)].map((match) => match[1]!);
      for (const target of [...linked, ...mentioned]) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
        const [path, anchor] = target.split('#');
        const file = path ? resolve(dirname(projectPath(document)), path) : projectPath(document);
        if (!file.startsWith(`${root}/`)) problems.push(`${document} links ${target}, outside the repository`);
        else if (!existsSync(file)) problems.push(`${document} links ${target}, which does not exist`);
        else if (anchor && file.endsWith('.md') && !anchorsOf(readFileSync(file, 'utf8')).has(anchor))
          problems.push(`${document} links ${target}, a section that does not exist`);
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
  });
});

/** The anchors of a Markdown document: its headings as GitHub spells them, and its `<a id>`s. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  // Lines in code blocks are no headings (a `# comment` of a shell block).
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '');
  for (const [, heading] of prose.matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replaceAll(' ', '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  for (const [, id] of prose.matchAll(/<a id="([^"]+)"/g)) anchors.add(id!);
  return anchors;
}

/** The `sh` blocks of the README's Quick start section that call curl, as steps. */
function quickStartBlocks(): Step[][] {
  const readme = readFileSync(projectPath('README.md'), 'utf8');
  const start = readme.indexOf('\n## Quick start\n');
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .map((match) => match[1]!)
    .filter((block) => block.includes('curl '))
    .map(stepsOf);
}

/** Commands (continuation lines joined) and the answers shown under them; comments and `KEY=…` dropped. */
function stepsOf(block: string): Step[] {
  const steps: Step[] = [];
  const lines = block.split('\n');
  for (let index = 0; index < lines.length; index++) {
    let line = lines[index]!;
    if (line.trim() === '' || line.startsWith('KEY=')) continue;
    if (line.startsWith('# ')) {
      const shown = line.slice(2);
      if (/^[{[]/.test(shown) && steps.length > 0) steps[steps.length - 1]!.shown = shown;
      continue;
    }
    while (line.endsWith('\\')) line = `${line}\n${lines[++index]}`;
    steps.push({ command: line });
  }
  return steps;
}

/** Runs the steps in one bash, at `host` instead of localhost:9000; answers each step's output. */
async function runBlock(steps: Step[], host: string): Promise<string[]> {
  const script = [
    'set -euo pipefail',
    // Quietly as written (-s), but a refused request fails the step instead of printing an error body.
    'curl() { command curl --fail-with-body "$@"; }',
    ...steps.map((step) => `${step.command.replaceAll('localhost:9000', host)}\nprintf '\\n%s\\n' '${END_OF_STEP}'`),
  ].join('\n');
  const { stdout } = await run('bash', ['-c', script], { env: { ...process.env, KEY: ADMIN_KEY } }).catch(
    (error: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(`the quick start failed: ${error.message}\n${error.stdout ?? ''}\n${error.stderr ?? ''}`);
    },
  );
  return stdout
    .split(`\n${END_OF_STEP}\n`)
    .slice(0, -1)
    .map((output) => output.trim());
}

/** The answer a README comment shows, as a pattern: the text itself, `…` matching anything. */
function shownAnswer(shown: string): RegExp {
  const parts = shown.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${parts.join('.*')}$`);
}
