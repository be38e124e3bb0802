/**
 * The Admin API's check of a policy rule before it is stored: a rule that would break the
 * bundle (or the Cedar policy set) is refused with the engine's own parse error.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { DECISION_ROOT, bundlePathProblem } from './build.js';
import { OpaBusyError, opaMessage, runOpa, type OpaRun } from '../opa/binary.js';
import { inScratchDirectory } from '../opa/scratch.js';
import { policySandboxLimits } from '../opa/sandbox.js';
import { policySandbox, SandboxJobError, SandboxLimitError } from '../sandbox/index.js';

export type RuleKind = 'rego' | 'cedar';

/** Null when the rule is valid, else a message for the 400 response. */
/** Another Rego rule the candidate is compiled with (the bundle's other files). */
export interface CompanionRule {
  path: string;
  content: string;
}

/** Null when the rule is valid, else a message for the 400 response. */
export async function validateRule(
  opaBinary: string,
  kind: RuleKind,
  path: string,
  content: string,
  companions: CompanionRule[] = [],
): Promise<string | null> {
  if (kind !== 'rego' && kind !== 'cedar') return 'kind must be rego or cedar';
  const sizeProblem = ruleSizeProblem(content);
  if (sizeProblem) return sizeProblem;
  const pathProblem = bundlePathProblem(kind, path);
  if (pathProblem) return pathProblem;
  return kind === 'cedar' ? validateCedar(content) : validateRego(opaBinary, path, content, companions);
}

/** Parsing and compiling a rule costs with its size (an 800 KB Cedar rule took 27 s): a rule over the limit is refused unread. */
function ruleSizeProblem(content: string): string | null {
  const bytes = Buffer.byteLength(content);
  const { ruleMaxBytes } = policySandboxLimits();
  return bytes > ruleMaxBytes
    ? `content is ${bytes} bytes, over the limit of ${ruleMaxBytes} bytes for a rule (POLICY_RULE_MAX_BYTES)`
    : null;
}

/**
 * Cedar parses the rule in the policy sandbox (a large rule takes seconds to parse): a limit it
 * reaches is the rule's problem, told as such; a sandbox with no thread free is a 503 (thrown).
 */
async function validateCedar(content: string): Promise<string | null> {
  try {
    return await policySandbox().cedarRuleProblem(content);
  } catch (error) {
    if (error instanceof SandboxLimitError) return `the Cedar rule could not be checked: ${error.message}`;
    if (error instanceof SandboxJobError) return `Cedar parse error: ${error.message}`;
    throw error;
  }
}

/**
 * `opa check` compiles the rule exactly as OPA will, next to the other bundled rules so that
 * references to shared helpers resolve; a companion in the candidate's own package is left
 * out (the candidate stands in for it, e.g. a versioned draft of a bundled decision). It runs
 * with the sandbox's capabilities (opa/sandbox.ts): a rule using a builtin that reaches outside
 * (http.send, opa.runtime, …) is refused here, naming it. `opa parse` then tells the
 * candidate's package. A run over a limit refuses the rule naming the limit; no run free is a 503.
 */
async function validateRego(
  opaBinary: string,
  path: string,
  content: string,
  companions: CompanionRule[],
): Promise<string | null> {
  try {
    return await inScratchDirectory('arbiter-rule-', async (dir) => {
      const candidatePackage = packageLine(content);
      const others = companions.filter((rule) => packageLine(rule.content) !== candidatePackage);
      // Two trees, so that a companion at the candidate's own path (a shared rule beside a tenant's
      // rule of another package at that path) is compiled with it rather than overwritten by it.
      const [candidateTree, companionTree] = [join(dir, 'candidate'), join(dir, 'companions')];
      const files = [
        ...others.map((rule) => ({ tree: companionTree, ...rule })),
        { tree: candidateTree, path, content },
      ];
      for (const rule of files) {
        const file = join(rule.tree, rule.path);
        await mkdir(dirname(file), { recursive: true });
        await writeFile(file, rule.content);
      }
      const shown = (run: OpaRun) => opaMessage(run, candidateTree, companionTree, dir);
      // Parsed first: a schema annotation that refers outside itself is read by the compile that checks it.
      // (A rule that does not parse is told as `opa check` tells it: it stops at the parse, before any schema.)
      const parsed = await runOpa(opaBinary, ['parse', '--format', 'json', join(candidateTree, path)]);
      const problem =
        parsed.exitCode === 0 ? (schemaReferenceProblem(parsed.stdout) ?? packageProblem(parsed.stdout)) : null;
      if (problem) return problem;
      const checked = await runOpa(opaBinary, ['check', dir]);
      if (checked.exitCode !== 0) return `Rego error: ${shown(checked)}`;
      return parsed.exitCode === 0 ? null : `Rego error: ${shown(parsed)}`;
    });
  } catch (error) {
    if (error instanceof OpaBusyError) throw error;
    return `the rule could not be checked: ${(error as Error).message}`;
  }
}

/**
 * A rule's `schemas` annotations (METADATA) may define a schema inline, referring only within it
 * (`$ref` "#…"): OPA's compile reads any other reference, a `file://` one included (the capabilities'
 * `allow_net` governs only the network), and its error quotes what it read. Found in OPA's own parse
 * of the rule, so that no spelling (YAML escapes, block or flow style) slips past. `$id` would
 * change what a local reference resolves against, so it is refused too.
 */
function schemaReferenceProblem(parseOutput: string): string | null {
  const outside = (value: unknown): string | null => {
    if (Array.isArray(value)) return value.map(outside).find((found) => found !== null) ?? null;
    if (typeof value !== 'object' || value === null) return null;
    for (const [key, member] of Object.entries(value)) {
      if (key === '$id') return '$id';
      if (key === '$ref' && !(typeof member === 'string' && member.startsWith('#'))) return '$ref';
      const found = outside(member);
      if (found) return found;
    }
    return null;
  };
  // The whole tree: annotations are listed per module and per rule; no other member is named "$ref" or "$id".
  const found = outside(JSON.parse(parseOutput));
  return found
    ? `a schema annotation may refer only within itself ("$ref": "#…"; no ${found === '$id' ? '"$id"' : 'other "$ref"'}): the rule reaches nothing outside the policy`
    : null;
}

function packageLine(content: string): string | null {
  return /^\s*package\s+([\w.]+)/m.exec(content)?.[1] ?? null;
}

function packageProblem(parseOutput: string): string | null {
  const ast = JSON.parse(parseOutput) as { package?: { path?: { value: unknown }[] } };
  const segments = (ast.package?.path ?? []).slice(1).map((term) => String(term.value));
  if (segments[0] !== DECISION_ROOT) {
    return `package ${segments.join('.') || '(none)'} is outside ${DECISION_ROOT}: rule files declare package ${DECISION_ROOT}.<decision point> (or ${DECISION_ROOT}.<anything> for helpers)`;
  }
  return null;
}
