/**
 * docs/policy.md's worked examples are src/policy/contract/examples.ts: each `<!-- example: <name> -->`
 * marker is followed by that example as the docs must show it (its input as a JSON block unless
 * it is a variant, then `→ <decision>`). This checks the docs' text against the data, every input
 * against its point's schema, every decision against the result schema, and the default pack's
 * actual decision against the documented one.
 *
 * After changing an example: WRITE_DOCS=1 npm run test:files -- test/policy/docs-examples.test.ts
 * rewrites the marked parts of the docs from the data (and still checks the decisions).
 */
import { writeFileSync } from 'node:fs';
import { expect } from 'chai';
import { checkInput, checkResult, type DecisionInput } from '../../src/policy/index.js';
import {
  CLIENT_CREDENTIALS_TOKEN_INPUT,
  EXAMPLE_PARTIES,
  exampleInput,
  POLICY_EXAMPLES,
  type PolicyExample,
} from '../../src/policy/contract/examples.js';
import { AUTHZEN_DATA, SHARING_CEDAR, SHARING_REGO } from '../authzen/sharing.js';
import { DOCS_URL, fencedAfter, readDocs } from './docs.js';
import { eventually, putData, putRule, startPolicyHarness, type PolicyHarness } from './support.js';

const WIDTH = 110;
const MARKER = /<!-- example: ([\w-]+) -->\n/g;
/** The policy data an example adds (a JSON block: data key → payload) and the rules (a block each). */
const DATA_MARKER = /<!-- example-data: ([\w-]+) -->\n(?:```json\n[\s\S]*?\n```\n)?/g;
const RULES_MARKER = /<!-- example-rules: ([\w-]+) -->\n(?:```(?:rego|cedar)\n[\s\S]*?\n```\n)*/g;

describe('the examples of docs/policy.md', function () {
  let harness: PolicyHarness;

  before(async function () {
    harness = await startPolicyHarness();
  });

  after(async function () {
    await harness?.close();
  });

  it('are quoted from src/policy/contract/examples.ts, each once', function () {
    const docs = readDocs();
    const expected = syncedDocs(docs);
    if (process.env.WRITE_DOCS) writeFileSync(DOCS_URL, expected);
    else
      expect(docs, 'docs/policy.md differs from src/policy/contract/examples.ts (WRITE_DOCS=1 rewrites it)').to.equal(
        expected,
      );
    const marked = [...expected.matchAll(MARKER)].map((match) => match[1]);
    expect([...marked].sort()).to.deep.equal(['parties', ...POLICY_EXAMPLES.map((example) => example.name)].sort());
  });

  it('fit the input schema of their point and the result schema', function () {
    for (const example of POLICY_EXAMPLES) {
      expect(checkInput(example.point, exampleInput(example)), example.name).to.equal(null);
      expect(checkResult(example.decision), example.name).to.equal(null);
    }
  });

  it('are decided by the default pack as documented', async function () {
    const changesPolicy = (example: PolicyExample) => Boolean(example.data || example.rules);
    for (const example of POLICY_EXAMPLES.filter((candidate) => !changesPolicy(candidate))) {
      const outcome = await harness.engine.decide(example.point, exampleInput(example) as DecisionInput);
      expect(outcome.decision, example.name).to.deep.equal(example.decision);
    }
    // Each with its data added (and kept) and its rules in force while it is decided.
    for (const example of POLICY_EXAMPLES.filter(changesPolicy)) {
      for (const [dataKey, payload] of Object.entries(example.data ?? {}))
        await putData(harness.store, dataKey, payload);
      for (const rule of example.rules ?? []) await putRule(harness.store, { ...rule, enabled: true });
      await eventually(async () => {
        const outcome = await harness.engine.decide(example.point, exampleInput(example) as DecisionInput);
        expect(outcome.decision, example.name).to.deep.equal(example.decision);
      });
      for (const rule of example.rules ?? []) await putRule(harness.store, { ...rule, enabled: false });
    }
  });

  it('quote the document-sharing policies and data that test/authzen runs', function () {
    expect(fencedAfter('<!-- sharing: rego -->', 'rego')).to.equal(SHARING_REGO.trimEnd());
    expect(fencedAfter('<!-- sharing: cedar -->', 'cedar')).to.equal(SHARING_CEDAR.trimEnd());
    expect(JSON.parse(fencedAfter('<!-- sharing: data -->', 'json'))).to.deep.equal(AUTHZEN_DATA);
  });

  it('include the input the console playground and the OpenAPI document start from', async function () {
    const input = {
      tenant: '_default',
      time: new Date().toISOString(),
      ...CLIENT_CREDENTIALS_TOKEN_INPUT,
    } as DecisionInput;
    expect(checkInput('token', input)).to.equal(null);
    expect((await harness.engine.decide('token', input)).decision).to.deep.equal({
      allow: true,
      scopes: ['read'],
      authorization_details: [],
    });
  });
});

/** The docs with every marked example replaced by its rendering from the data. */
function syncedDocs(docs: string): string {
  const examples = new Map<string, string>(POLICY_EXAMPLES.map((example) => [example.name, rendered(example)]));
  examples.set('parties', fenced(block(EXAMPLE_PARTIES, '')));
  const named = (name: string, what: 'data' | 'rules') => {
    const example = POLICY_EXAMPLES.find((candidate) => candidate.name === name);
    if (!example?.[what])
      throw new Error(`docs/policy.md marks the ${what} of "${name}", an example of examples.ts without ${what}`);
    return example;
  };
  const withChanges = docs
    .replace(
      DATA_MARKER,
      (_whole, name: string) => `<!-- example-data: ${name} -->\n${fenced(block(named(name, 'data').data, ''))}`,
    )
    .replace(
      RULES_MARKER,
      (_whole, name: string) =>
        `<!-- example-rules: ${name} -->\n${named(name, 'rules')
          .rules!.map(
            (rule) => `\`\`\`${rule.path.endsWith('.cedar') ? 'cedar' : 'rego'}\n${rule.content.trimEnd()}\n\`\`\`\n`,
          )
          .join('')}`,
    );
  return withChanges.replace(
    new RegExp(`${MARKER.source}(?:\`\`\`json\\n[\\s\\S]*?\\n\`\`\`\\n)?(?:→ \`[^\\n]*\`)?`, 'g'),
    (whole, name: string) => {
      const text = examples.get(name);
      if (text === undefined)
        throw new Error(`docs/policy.md marks an example "${name}" that src/policy/contract/examples.ts does not have`);
      return `<!-- example: ${name} -->\n${text}`;
    },
  );
}

function rendered(example: PolicyExample): string {
  const result = `→ \`${inline(example.decision)}\``;
  return example.shown ? `${fenced(block(example.input, ''))}${result}` : result;
}

function fenced(json: string): string {
  return `\`\`\`json\n${json}\n\`\`\`\n`;
}

/** JSON on one line, spaced for reading. */
function inline(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(inline).join(', ')}]`;
  if (value !== null && typeof value === 'object')
    return `{${Object.entries(value)
      .map(([key, item]) => `${JSON.stringify(key)}: ${inline(item)}`)
      .join(', ')}}`;
  return JSON.stringify(value);
}

/**
 * JSON that breaks an object or array over lines only where one line would be wider than WIDTH,
 * keeping short neighbouring members on one line.
 */
function block(value: unknown, indent: string): string {
  const line = inline(value);
  if (indent.length + line.length <= WIDTH || value === null || typeof value !== 'object') return line;
  const inner = `${indent}  `;
  const members = Array.isArray(value)
    ? value.map((item) => block(item, inner))
    : Object.entries(value).map(([key, item]) => `${JSON.stringify(key)}: ${block(item, inner)}`);
  const lines: string[] = [];
  for (const member of members) {
    const last = lines.length - 1;
    const joined = last >= 0 ? `${lines[last]}, ${member}` : '';
    if (last >= 0 && !member.includes('\n') && !lines[last]!.includes('\n') && inner.length + joined.length <= WIDTH)
      lines[last] = joined;
    else lines.push(member);
  }
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  return `${open}\n${lines.map((member) => `${inner}${member}`).join(',\n')}\n${indent}${close}`;
}
