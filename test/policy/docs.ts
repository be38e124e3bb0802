/** docs/policy.md as the tests that check its examples read it. */
import { readFileSync } from 'node:fs';

export const DOCS_URL = new URL('../../docs/policy.md', import.meta.url);

export function readDocs(): string {
  return readFileSync(DOCS_URL, 'utf8');
}

/** The code block of `language` right after `marker` in docs/policy.md, or an Error saying it is missing. */
export function fencedAfter(marker: string, language: string, docs = readDocs()): string {
  const opening = `${marker}\n\`\`\`${language}\n`;
  const start = docs.indexOf(opening);
  if (start < 0) throw new Error(`docs/policy.md has no ${language} block after ${marker}`);
  const body = start + opening.length;
  return docs.slice(body, docs.indexOf('\n```\n', body));
}
