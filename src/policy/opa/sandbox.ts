/**
 * What policy code may reach, wherever OPA runs it: every OPA process gets an environment that
 * holds nothing of the server's (no secret for `opa.runtime().env` to read), and every OPA
 * command that compiles or evaluates Rego gets a capabilities file without the builtins that
 * reach outside the policy (the network, DNS, files, OPA's own environment). `opa run` takes no
 * capabilities, so the managed OPA is kept safe by never being given a rule that uses one: every
 * write of a rule is compiled with these capabilities first (bundle/validate-rule.ts, validate.ts).
 * Also the limits of those runs (time, memory, how many at once) and of what they are given (the
 * size of a rule and of the bundle).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../../config/index.js';
import { processScratchDirectory } from './scratch.js';

/**
 * Builtins left out of every Arbiter policy, and why (the 400 of a rule that uses one says it).
 * `net.cidr_*` stay: they compute on the strings they are given and look nothing up. Checked
 * with OPA 1.21.1: `json.verify_schema` and `json.match_schema` fetch a schema's `$ref` over
 * HTTP and read a `file://` one from the disk (the error quotes the file's first byte).
 */
export const FORBIDDEN_BUILTINS: ReadonlyMap<string, string> = new Map([
  ['http.send', 'it sends HTTP requests'],
  ['net.lookup_ip_addr', 'it makes DNS lookups'],
  ['opa.runtime', "it reads OPA's environment and configuration"],
  ['json.verify_schema', "it fetches a schema's $ref from URLs and files"],
  ['json.match_schema', "it fetches a schema's $ref from URLs and files"],
]);

/** The OPA commands that compile Rego and so take `--capabilities` (`opa parse` and `opa run` do not). */
const COMMANDS_WITH_CAPABILITIES = new Set(['check', 'build', 'eval', 'test', 'bench']);

export interface PolicySandboxLimits {
  /** OPA CLI runs at once in this process; the others wait. */
  concurrency: number;
  /** How long a run waits for its turn before it is refused as busy. */
  queueWaitMs: number;
  /** A run taking longer is killed. */
  timeoutMs: number;
  /** A run whose resident memory grows over this is killed (and Go's GC aims below it). */
  memoryBytes: number;
  /** The largest rule (Rego or Cedar) a write may store. */
  ruleMaxBytes: number;
  /** The largest bundle (every bundled rule and data entry) a write may make. */
  bundleMaxBytes: number;
  /** A live decision's time budget (POLICY_DECISION_TIMEOUT_MS): a write whose trial decides an input slower is refused. */
  decisionBudgetMs: number;
}

const MB = 1024 * 1024;
/** Also the defaults of config/default.json (README, "Configuration"). */
const DEFAULT_LIMITS: PolicySandboxLimits = {
  concurrency: 2,
  queueWaitMs: 5000,
  timeoutMs: 5000,
  memoryBytes: 256 * MB,
  ruleMaxBytes: 256 * 1024,
  bundleMaxBytes: 4 * MB,
  decisionBudgetMs: 2000,
};

let limits: PolicySandboxLimits = DEFAULT_LIMITS;

/** Sets this process's limits from the configuration (once, when the policy engine starts). */
export function configureOpaSandbox(
  config: Pick<
    Config,
    | 'policyOpaConcurrency'
    | 'policyOpaQueueMs'
    | 'policyOpaTimeoutMs'
    | 'policyOpaMemoryMb'
    | 'policyRuleMaxBytes'
    | 'policyBundleMaxBytes'
    | 'policyDecisionTimeoutMs'
  >,
): void {
  limits = {
    concurrency: config.policyOpaConcurrency,
    queueWaitMs: config.policyOpaQueueMs,
    timeoutMs: config.policyOpaTimeoutMs,
    memoryBytes: config.policyOpaMemoryMb * MB,
    ruleMaxBytes: config.policyRuleMaxBytes,
    bundleMaxBytes: config.policyBundleMaxBytes,
    decisionBudgetMs: config.policyDecisionTimeoutMs,
  };
}

export function policySandboxLimits(): PolicySandboxLimits {
  return limits;
}

/**
 * The whole environment of an OPA CLI run: none of the server's variables (OPA needs no PATH or
 * HOME to compile and evaluate files it is given), one core, and Go's garbage collector aiming
 * below the memory limit (a soft cap: the watcher in binary.ts kills a run that passes it).
 */
export function cliEnvironment(memoryBytes = limits.memoryBytes): NodeJS.ProcessEnv {
  return { GOMAXPROCS: '1', GOMEMLIMIT: `${Math.floor(memoryBytes / MB)}MiB` };
}

/** `args` with `--capabilities <file>` after the command, for the commands that compile Rego. */
export function withCapabilities(args: string[], capabilitiesFile: string): string[] {
  const [command, ...rest] = args;
  return command !== undefined && COMMANDS_WITH_CAPABILITIES.has(command)
    ? [command, '--capabilities', capabilitiesFile, ...rest]
    : args;
}

/** How a message names a forbidden builtin (a rule's 400, the log line of a bundle not served). */
export const NOT_ALLOWED = 'is not allowed in Arbiter policies';

/** OPA's "undefined function" for a forbidden builtin, said as what it is. */
export function explainForbiddenBuiltins(message: string): string {
  return message.replace(/(?:rego_type_error: )?undefined function ([\w.]+)/g, (whole, name: string) => {
    const why = FORBIDDEN_BUILTINS.get(name);
    return why ? `${name} ${NOT_ALLOWED} (${why})` : whole;
  });
}

const capabilitiesFiles = new Map<string, Promise<string>>();

/**
 * The capabilities file of this OPA binary: `opa capabilities --current` without the forbidden
 * builtins, and no host allowed to the network builtins should one remain. Written once per
 * process and binary, into this process's scratch folder (scratch.ts): removed when it exits, or
 * by a later start when it is killed.
 */
export async function capabilitiesFileOf(binary: string): Promise<string> {
  const kept = capabilitiesFiles.get(binary);
  if (kept) {
    const file = await kept.catch(() => null);
    // Written again when it is gone: removed from under this process (a temporary-file cleaner, or a
    // server in another PID namespace sharing the temporary directory that took this pid for a dead one).
    if (file !== null && existsSync(file)) return file;
    if (capabilitiesFiles.get(binary) !== kept) return capabilitiesFileOf(binary);
  }
  const file = writeCapabilitiesFile(binary);
  // A failure (OPA not installed yet) is not kept: the next run tries again.
  file.catch(() => capabilitiesFiles.delete(binary));
  capabilitiesFiles.set(binary, file);
  return file;
}

async function writeCapabilitiesFile(binary: string): Promise<string> {
  const dir = await processScratchDirectory('arbiter-capabilities-');
  const file = join(dir, 'capabilities.json');
  await writeFile(file, restrictedCapabilities(await currentCapabilities(binary)), { mode: 0o600 });
  return file;
}

/** `opa capabilities --current` (its JSON) less the forbidden builtins; also what scripts/opa-test.sh checks the pack with. */
export function restrictedCapabilities(current: string): string {
  const capabilities = JSON.parse(current) as { builtins: { name: string }[] };
  return JSON.stringify({
    ...capabilities,
    builtins: capabilities.builtins.filter((builtin) => !FORBIDDEN_BUILTINS.has(builtin.name)),
    allow_net: [],
  });
}

function currentCapabilities(binary: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      binary,
      ['capabilities', '--current'],
      { env: cliEnvironment(), timeout: 15_000, maxBuffer: 8 * MB },
      (error, stdout) => {
        if (error) reject(new Error(`cannot read the capabilities of ${binary}: ${error.message}`));
        else resolve(stdout);
      },
    );
  });
}
