/**
 * Arbiter's layers ("Dependency direction" of the intended architecture), lowest first:
 *
 *   http, config, log ◄ tenancy, store (+ adapters beside it) ◄ catalog, records ◄ policy ◄ audit, metrics, tracing
 *     ◄ oauth, uma, delegation, authzen ◄ admin ◄ composition root (app, routes, dispatch, probes,
 *       admin-api, state, server, main, collections, migrations, cli/, workers/)
 *
 * A module may import its own layer and those to its left, never one to its right, and no
 * module takes part in an import circle. src/dev-idp (a stand-alone development IdP) imports
 * no other folder and is in no layer. Run by scripts/check-deps.sh.
 */

/** Path patterns of each layer, lowest first. */
const LAYERS = [
  { name: 'base', path: '^src/(http|config|log)/' },
  { name: 'store', path: '^(src/(tenancy|store)/|adapters/)' },
  { name: 'catalog', path: '^src/(catalog|records)/' },
  { name: 'policy', path: '^src/policy/' },
  { name: 'audit', path: '^src/(audit|metrics|tracing)/' },
  { name: 'protocol', path: '^src/(oauth|uma|delegation|authzen)/' },
  { name: 'signals', path: '^src/(signals|outbox)/' },
  { name: 'admin', path: '^src/admin/' },
  {
    name: 'root',
    path: '^src/((app|server|main|collections|migrations|routes|dispatch|probes|admin-api|state)\\.ts$|cli/|workers/)',
  },
];

/** One rule per layer: nothing it imports lies in a layer above it. */
const layerRules = LAYERS.slice(0, -1).map((layer, index) => ({
  name: `layer-${layer.name}`,
  comment: `${layer.name} may only import ${LAYERS.slice(0, index + 1)
    .map((below) => below.name)
    .join(', ')} (see the top of .dependency-cruiser.cjs)`,
  severity: 'error',
  from: { path: layer.path },
  to: { path: LAYERS.slice(index + 1).map((above) => above.path) },
}));

module.exports = {
  forbidden: [
    {
      name: 'decision-thread-stays-light',
      comment:
        'What a decision thread (src/policy/live/thread.ts) or a policy sandbox thread (src/policy/sandbox/worker.ts) loads only loads and evaluates policy, and a thread may start under load: none of it may import the configuration, the OPA sidecar driver, the Wasm build, the OPA binary runner or an HTTP client (a thread paid about 350 ms of CPU at start for them), nor Ajv (results are checked by RESULT_SCHEMA compiled ahead of time, contract/result-check.ts: loading and compiling it cost a thread about 70 ms).',
      severity: 'error',
      from: {
        path: '^src/policy/(live/(thread|protocol)|opa/(compiled|verdict)|cedar/[^/]+|contract/(points|result-check|result-validator[.]generated)|bundle/data-tree)[.]ts$',
      },
      to: {
        dependencyTypesNot: ['type-only'],
        path: [
          '^src/config/',
          '^src/policy/opa/(driver|wasm|binary|memo|sandbox)[.]ts$',
          'node_modules/(got|tar-stream|ajv)/',
        ],
      },
    },
    {
      name: 'no-circular',
      comment: 'An import circle: modules that cannot be read, loaded or tested one before the other.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'no-folder-cycle',
      comment:
        'Two top-level folders of src that import each other (src/uma imports src/oauth while src/oauth imports src/uma): neither can be read or tested before the other.',
      severity: 'error',
      scope: 'folder',
      from: { path: '^src/[^/]+$' },
      to: { path: '^src/[^/]+$', circular: true },
    },
    {
      name: 'index-only-between-folders',
      comment:
        'A top-level folder of src is imported by the other folders through its index.ts only. Not yet enforced: ' +
        'imports of src/http (it has no index yet), and from admin, cli, catalog and oauth/register (being reworked).',
      severity: 'error',
      from: { path: '^src/(?!admin/|cli/|catalog/|oauth/register/)([^/]+)/' },
      to: { path: '^src/[^/]+/', pathNot: ['^src/$1/', '^src/[^/]+/index\\.ts$', '^src/http/'] },
    },
    {
      name: 'store-interface-knows-no-adapter',
      comment: 'The store interface knows no implementation: only src/store/open.ts picks an adapter by URL.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/store/open\\.ts$' },
      to: { path: '^adapters/(sqlite|mongodb|postgresql)/' },
    },
    {
      name: 'only-the-root-opens-the-store',
      comment: 'src/store/open.ts imports every adapter: only the composition root chooses one.',
      severity: 'error',
      from: { path: '^(src|adapters)/', pathNot: '^src/(store/open|collections|server|main|app)\\.ts$' },
      to: { path: '^src/store/open\\.ts$' },
    },
    {
      name: 'root-is-imported-by-root-only',
      comment: 'app.ts, server.ts and main.ts compose everything; only server.ts and main.ts import them.',
      severity: 'error',
      from: { path: '^(src|adapters)/', pathNot: '^src/(server|main)\\.ts$' },
      to: { path: '^src/(app|server|main)\\.ts$' },
    },
    {
      name: 'no-build-tools-at-run-time',
      comment:
        'The server runs on its dependencies only: a devDependency (esbuild, tsx, typescript, …) is for the build and ' +
        'the tests (`npm run build` bundles the console into dist/console/; the image prunes devDependencies).',
      severity: 'error',
      from: { path: '^(src|adapters)/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'cli-writes-through-the-repository',
      comment:
        'The command line writes records through src/records, as the Admin API does; it does not reach into the Admin API.',
      severity: 'error',
      from: { path: '^src/cli/' },
      to: { path: '^src/admin/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/admin/console/app/' },
    // Type-only imports count: a circle of types is still a circle for the reader.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
