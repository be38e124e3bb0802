/**
 * Rego decisions evaluated inside this process. The OPA binary that serves the bundle also
 * compiles each bundle revision to WebAssembly (`opa build -t wasm`), and OPA's own SDK
 * (@open-policy-agent/opa-wasm) runs it: a decision costs tens of microseconds instead of an
 * HTTP round trip to the sidecar. The sidecar stays the engine of record: every decision the
 * compiled module cannot make exactly as OPA would goes to it (see `CompiledRego.evaluate`),
 * and so does every decision while a new revision compiles.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import type { Logger } from '../../log/index.js';
import type { PolicySnapshot } from '../bundle/build.js';
import { DECISION_POINTS, type DecisionPoint } from '../contract/types.js';
import { opaMessage, runOpa, type OpaLane } from './binary.js';
import { inScratchDirectory } from './scratch.js';
import { CompiledRego, entrypointOf, loadCompiledRego } from './compiled.js';
import { ContentMemo, opaOutcomeKey } from './memo.js';

/**
 * One bundle revision compiled to Wasm: the module and the points it decides, or why it cannot be
 * (OPA's message). Plain data, so that it can cross from the process that compiled it to the
 * workers that use it (src/workers: the primary compiles each revision once for the machine).
 */
export type WasmBuild = { wasm: Uint8Array; points: DecisionPoint[] } | { problem: string };

/** Compiles one revision's gzipped bundle; rejects only when OPA cannot be run at all. */
export type WasmCompiler = (bundle: Buffer, revision: string) => Promise<WasmBuild>;

/** The compiler of a lone process: this machine's OPA binary, run here. */
export function localWasmCompiler(opaBinary: string, lane: OpaLane = 'submitted'): WasmCompiler {
  return (bundle) => compileBundle(opaBinary, bundle, lane);
}

/**
 * Keeps the compiled module of the newest revision. `compiledFor` never waits: when the
 * snapshot's revision is not compiled yet it starts compiling it (once per revision) and answers
 * null, and the caller asks OPA meanwhile.
 */
export class InProcessRego {
  private compiled: CompiledRego | null = null;
  /** The newest revision being compiled or tried, so that a revision is tried once. */
  private attempted: string | null = null;
  /** After an unexpected failure (OPA could not be started, …), the revision is tried again from then on. */
  private retryAt = 0;
  private readonly reported = new Set<string>();

  constructor(
    private readonly compileWasm: WasmCompiler,
    private readonly bundleOf: (snapshot: PolicySnapshot) => Promise<Buffer>,
    private readonly log: Logger,
  ) {}

  compiledFor(snapshot: PolicySnapshot): CompiledRego | null {
    if (this.compiled?.revision === snapshot.revision) return this.compiled;
    if (this.attempted !== snapshot.revision || (this.retryAt !== 0 && Date.now() >= this.retryAt))
      void this.compile(snapshot);
    return null;
  }

  /** The revision decided in this process (null: none, every Rego decision goes to OPA). */
  get revision(): string | null {
    return this.compiled?.revision ?? null;
  }

  private async compile(snapshot: PolicySnapshot): Promise<void> {
    const { revision } = snapshot;
    this.attempted = revision;
    this.retryAt = 0;
    const started = Date.now();
    try {
      const compiled = await compileRego(this.compileWasm, snapshot, await this.bundleOf(snapshot), (point, reason) =>
        this.reportStop(revision, point, reason),
      );
      if ('problem' in compiled) {
        if (compiled.builtins) this.log.info({ revision, builtins: compiled.builtins }, compiled.problem);
        else this.log.warn({ revision, reason: compiled.problem }, 'Rego decisions of this revision go to OPA');
        this.settle(revision, null);
        return;
      }
      if (this.settle(revision, compiled)) {
        this.log.info(
          { revision, points: [...compiled.points], ms: Date.now() - started },
          'Rego decisions of this revision are evaluated in process',
        );
      }
    } catch (error) {
      this.log.warn(
        { revision, err: error },
        'Rego decisions of this revision go to OPA: the in-process module could not be built (tried again in a minute)',
      );
      if (this.settle(revision, null)) this.retryAt = Date.now() + RETRY_AFTER_MS;
    }
  }

  /** Keeps the outcome of a compilation only if no newer revision was tried meanwhile; true when kept. */
  private settle(revision: string, compiled: CompiledRego | null): boolean {
    if (this.attempted !== revision) return false;
    this.compiled = compiled;
    return true;
  }

  /** Logged once per revision and point: the same policy stops the same way on every call. */
  private reportStop(revision: string, point: DecisionPoint, reason: string): void {
    const key = `${revision}:${point}:${reason}`;
    if (this.reported.has(key)) return;
    if (this.reported.size > 1000) this.reported.clear();
    this.reported.add(key);
    this.log.info({ revision, point, reason }, 'a Rego decision went to OPA: the in-process evaluation stopped');
  }
}

const MISSING_ENTRYPOINT = /entrypoint "arbiter\/([a-z_]+)\/decision" does not refer to a rule/;

const RETRY_AFTER_MS = 60_000;

/**
 * A snapshot's bundle compiled to WebAssembly and loaded with its data, or why its decisions must
 * go to OPA (`builtins`: the ones the SDK implements differently). Throws when OPA cannot be run.
 * The live engine compiles each revision in force; impact analysis and shadow evaluation compile
 * their candidates the same way, so that both decide as the live policy would.
 */
export async function compileRego(
  /** An OPA binary to run here, or a compiler (a worker's asks its primary, which compiles a revision once). */
  compiler: string | WasmCompiler,
  snapshot: PolicySnapshot,
  bundle: Buffer,
  onStopped: (point: DecisionPoint, reason: string) => void,
): Promise<CompiledRego | { problem: string; builtins?: string[] }> {
  const compile = typeof compiler === 'string' ? localWasmCompiler(compiler) : compiler;
  const module = await compile(bundle, snapshot.revision);
  if ('problem' in module) return module;
  return loadCompiledRego(snapshot, module, onStopped);
}

/**
 * Modules built, by bundle (memo.ts): a revision is built once per process, whether the live
 * engine, impact analysis or shadow evaluation asks. A default pack's module is about 200 KB.
 */
const wasmBuilds = new ContentMemo<WasmBuild>({
  maxEntries: 16,
  maxBytes: 64 * 1024 * 1024,
  sizeOf: (build) => ('wasm' in build ? build.wasm.byteLength : build.problem.length),
});

/** `opa build -t wasm` of the bundle with one entrypoint per decision point it defines. */
function compileBundle(opaBinary: string, bundle: Buffer, lane: OpaLane): Promise<WasmBuild> {
  return wasmBuilds.get(opaOutcomeKey('opa build -t wasm', opaBinary, bundle), () =>
    buildWasm(opaBinary, bundle, lane),
  );
}

async function buildWasm(opaBinary: string, bundle: Buffer, lane: OpaLane): Promise<WasmBuild> {
  return inScratchDirectory('arbiter-wasm-', async (dir) => {
    const input = join(dir, 'bundle.tar.gz');
    const output = join(dir, 'wasm.tar.gz');
    await writeFile(input, bundle);
    const points = new Set<DecisionPoint>(DECISION_POINTS);
    while (points.size > 0) {
      const entrypoints = [...points].flatMap((point) => ['-e', entrypointOf(point)]);
      const built = await runOpa(opaBinary, ['build', '-t', 'wasm', '-b', input, '-o', output, ...entrypoints], lane);
      if (built.exitCode === 0) return { wasm: await wasmModuleOf(await readFile(output)), points: [...points] };
      const message = opaMessage(built, dir);
      const missing = MISSING_ENTRYPOINT.exec(message)?.[1] as DecisionPoint | undefined;
      if (!missing || !points.delete(missing)) return { problem: `opa build -t wasm failed: ${message}` };
    }
    return { problem: 'the bundle defines no decision' };
  });
}

/** policy.wasm out of the gzipped tar that `opa build` writes. */
async function wasmModuleOf(archive: Buffer): Promise<Buffer> {
  const entries = extract();
  Readable.from([archive]).pipe(createGunzip()).pipe(entries);
  for await (const entry of entries) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    if (entry.header.name.replace(/^\/+/, '') === 'policy.wasm') return Buffer.concat(chunks);
  }
  throw new Error('opa build wrote no policy.wasm');
}
