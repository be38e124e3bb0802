/**
 * The OPA bundle built from the shared policy rules and data (see docs/policy.md, "Bundle"):
 * `.manifest` with revision and roots, each rule's content at its path, each data entry's
 * payload as data.json under its dataKey. The build is deterministic (sorted entries, fixed
 * timestamps), so the same records always give the same bytes, revision and ETag.
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { pack } from 'tar-stream';
import { dataEntryProblem, dataFiles, mergeData, type DataEntry } from './data-tree.js';
import type { BundledRecords, PolicyRuleDoc } from '../records.js';

const gzipAsync = promisify(gzip);

/** The decision packages live under data.arbiter, so that root is always owned by the bundle. */
export const DECISION_ROOT = 'arbiter';

/** What one set of bundled records amounts to; everything else (bundle bytes, Cedar set) derives from it. */
export interface PolicySnapshot {
  /** sha256 over exactly what goes into the bundle: changes iff a bundled rule or data entry changes. */
  revision: string;
  rules: PolicyRuleDoc[];
  data: DataEntry[];
  /** The `data` document as policies see it. */
  mergedData: Record<string, unknown>;
  /** Records left out because they would break the bundle (reported in logs). */
  skipped: string[];
}

/** Each read's snapshot, derived once: loadPolicyLayers hands out the same read while the records are unchanged. */
const snapshotsOfReads = new WeakMap<BundledRecords, PolicySnapshot>();

export function snapshotOf(records: BundledRecords): PolicySnapshot {
  let snapshot = snapshotsOfReads.get(records);
  if (!snapshot) {
    snapshot = derivedSnapshot(records);
    snapshotsOfReads.set(records, snapshot);
  }
  return snapshot;
}

function derivedSnapshot(records: BundledRecords): PolicySnapshot {
  const skipped: string[] = [];
  const rules = records.rules.filter((rule) =>
    keep(bundlePathProblem(rule.kind, rule.path), `rule ${rule.path}`, skipped),
  );
  const usableData = records.data.filter((entry) =>
    keep(dataEntryProblem(entry.dataKey, entry.payload), `data ${entry.dataKey}`, skipped),
  );
  const data = usableData.map((entry) => ({ dataKey: entry.dataKey, value: JSON.parse(entry.payload) as unknown }));
  const revision = digest(
    JSON.stringify([
      rules.map((rule) => [rule.kind, rule.path, rule.content]),
      usableData.map((entry) => [entry.dataKey, entry.payload]),
    ]),
  );
  return { revision, rules, data, mergedData: mergeData(data), skipped };
}

/** Null when `path` can hold a rule of this kind inside a bundle, else why not. */
export function bundlePathProblem(kind: string, path: string): string | null {
  const extension = kind === 'cedar' ? '.cedar' : '.rego';
  if (!path.endsWith(extension)) return `path of a ${kind} rule must end with ${extension}`;
  if (
    path.startsWith('/') ||
    path.split('/').some((segment) => segment === '' || segment === '.' || segment === '..')
  ) {
    return 'path must be relative, without empty, "." or ".." segments';
  }
  if (!/^[A-Za-z0-9_./-]+$/.test(path)) return 'path may only contain letters, digits, "_", "-", "." and "/"';
  return null;
}

/** The first segment of each rule's package and each data key: the bundle's roots. */
export function bundleRoots(snapshot: PolicySnapshot): string[] {
  const roots = new Set([DECISION_ROOT]);
  for (const rule of snapshot.rules) {
    const root = rule.kind === 'rego' ? packageRoot(rule.content) : null;
    if (root) roots.add(root);
  }
  for (const entry of snapshot.data) roots.add(entry.dataKey.split('.')[0]!);
  return [...roots].sort();
}

/** The gzipped tar OPA downloads. Cedar files ride along for external consumers; OPA ignores them. */
export async function buildBundle(snapshot: PolicySnapshot): Promise<Buffer> {
  const files = new Map<string, string>();
  files.set(
    '.manifest',
    JSON.stringify({ revision: snapshot.revision, roots: bundleRoots(snapshot), rego_version: 1 }),
  );
  for (const rule of snapshot.rules) files.set(rule.path, rule.content);
  for (const [path, value] of dataFiles(snapshot.data)) files.set(path, JSON.stringify(value));
  return gzipAsync(await tarOf(files));
}

/** Strong ETag of a bundle revision (quoted, as HTTP wants it). */
export function etagOf(revision: string): string {
  return `"${revision}"`;
}

async function tarOf(files: Map<string, string>): Promise<Buffer> {
  const archive = pack();
  const chunks: Buffer[] = [];
  const collected = (async () => {
    for await (const chunk of archive) chunks.push(Buffer.from(chunk as Uint8Array));
  })();
  for (const [name, content] of files) {
    archive.entry({ name, mode: 0o644, mtime: new Date(0), uid: 0, gid: 0, uname: '', gname: '' }, content);
  }
  archive.finalize();
  await collected;
  return Buffer.concat(chunks);
}

function packageRoot(content: string): string | null {
  const withoutComments = content.replace(/#.*$/gm, '');
  return /^\s*package\s+([A-Za-z_][A-Za-z0-9_]*)/m.exec(withoutComments)?.[1] ?? null;
}

function keep(problem: string | null, what: string, skipped: string[]): boolean {
  if (problem) skipped.push(`${what}: ${problem}`);
  return problem === null;
}

export function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
