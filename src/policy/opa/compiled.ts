/**
 * One bundle revision's Rego decisions compiled to WebAssembly and loaded with OPA's own SDK
 * (wasm.ts builds the module with the OPA binary). Apart from the build so that a decision thread
 * (src/policy/live/thread.ts), which only loads and evaluates, does not load what builds: the OPA
 * binary's runner, the configuration, tar and the memo.
 */
import { loadPolicy, type LoadedPolicy } from '@open-policy-agent/opa-wasm';
import type { PolicySnapshot } from '../bundle/build.js';
import type { DecisionInput, DecisionPoint } from '../contract/types.js';
import { resultVerdict, type RegoVerdict } from './verdict.js';

/**
 * Builtins the SDK implements in JavaScript (sprintf-js, JavaScript regular expressions, a YAML
 * library) instead of inside the module, where OPA's Go versions may answer differently. A
 * revision that needs one is left to OPA entirely. Builtins neither the module nor the SDK has
 * (time.parse_rfc3339_ns, …) stop the evaluation that calls them, which OPA then makes.
 */
const JAVASCRIPT_BUILTINS = new Set([
  'sprintf',
  'regex.split',
  'json.is_valid',
  'yaml.is_valid',
  'yaml.marshal',
  'yaml.unmarshal',
]);

const UTF8 = new TextEncoder();

/** OPA's Wasm runtime stops an evaluation so when its memory cannot grow (the module's maximum is reached). */
const WASM_OUT_OF_MEMORY = /malloc|out of memory|memory access out of bounds/i;

/** Whether an evaluation stopped for `reason` (CompiledRego's onStopped) because it ran out of Wasm memory. */
export function outOfWasmMemory(reason: string | null): reason is string {
  return reason !== null && WASM_OUT_OF_MEMORY.test(reason);
}

/** The Wasm memory of a module that may grow to `memoryMb` (in 64 KiB pages), for loadPolicy. */
export function wasmMemoryOf(memoryMb: number): { initial: number; maximum: number } {
  return { initial: 5, maximum: memoryMb * 16 };
}

/** One bundle revision's decisions, compiled. */
export class CompiledRego {
  constructor(
    readonly revision: string,
    private readonly policy: LoadedPolicy,
    /** The points whose decision the bundle defines (the others are undefined; OPA says so). */
    readonly points: ReadonlySet<DecisionPoint>,
    private readonly onStopped: (point: DecisionPoint, reason: string) => void,
    /** The module itself, for the decision threads that load it too (src/policy/live). */
    readonly wasm?: Uint8Array,
  ) {}

  /** An evaluation of this revision stopped elsewhere (in a decision thread): reported as one here is. */
  stopped(point: DecisionPoint, reason: string): void {
    this.onStopped(point, reason);
  }

  /**
   * The verdict, or null when OPA must make this decision: the point is not compiled, or the
   * evaluation stopped (a builtin only OPA has, a conflict between rule values, …). Falling back
   * instead of failing keeps every answer OPA's, including its error messages.
   */
  evaluate(point: DecisionPoint, input: DecisionInput, text?: string): RegoVerdict | null {
    if (!this.points.has(point)) return null;
    let results: { result?: unknown }[];
    try {
      // The SDK takes the input's JSON as an ArrayBuffer as it is, instead of serializing the object again.
      const given = text === undefined ? input : (UTF8.encode(text).buffer as ArrayBuffer);
      results = this.policy.evaluate(given, entrypointOf(point)) as { result?: unknown }[];
    } catch (error) {
      this.onStopped(point, describeStop(error));
      return null;
    }
    if (!Array.isArray(results) || results.length === 0 || results[0]?.result === undefined)
      return { kind: 'undefined', inProcess: true };
    return { ...resultVerdict(point, results[0].result), inProcess: true };
  }
}

/**
 * A module `opa build` made of the snapshot's bundle, loaded with its data. `memory` bounds its
 * Wasm memory (the policy sandbox's threads give it a maximum: an evaluation that needs more stops).
 */
export async function loadCompiledRego(
  snapshot: PolicySnapshot,
  module: { wasm: Uint8Array; points: DecisionPoint[] },
  onStopped: (point: DecisionPoint, reason: string) => void,
  memory?: { initial: number; maximum?: number },
): Promise<CompiledRego | { problem: string; builtins?: string[] }> {
  const policy = await loadPolicy(module.wasm, memory);
  const needsJavaScript = requiredBuiltins(policy).filter((name) => JAVASCRIPT_BUILTINS.has(name));
  if (needsJavaScript.length)
    return {
      problem:
        'Rego decisions of this revision go to OPA: the policy uses builtins the in-process evaluator does not implement as OPA does',
      builtins: needsJavaScript,
    };
  policy.setData(snapshot.mergedData);
  return new CompiledRego(snapshot.revision, policy, new Set(module.points), onStopped, module.wasm);
}

/**
 * The builtins the module imports from its host, read through OPA's Wasm ABI (the exported
 * `builtins` function returns a JSON object keyed by builtin name).
 */
function requiredBuiltins(policy: LoadedPolicy): string[] {
  const instance = 'instance' in policy.wasmInstance ? policy.wasmInstance.instance : policy.wasmInstance;
  const exports = instance.exports as { builtins(): number; opa_json_dump(address: number): number };
  const bytes = new Uint8Array(policy.mem.buffer);
  const start = exports.opa_json_dump(exports.builtins());
  const end = bytes.indexOf(0, start);
  return Object.keys(JSON.parse(Buffer.from(bytes.subarray(start, end)).toString('utf8')) as object);
}

/** The Wasm entrypoint (and `opa build -e` argument) of a point's decision. */
export function entrypointOf(point: DecisionPoint): string {
  return `arbiter/${point}/decision`;
}

function describeStop(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : String(error);
}
