/**
 * Arbiter's layers ("Dependency direction" of the intended architecture), lowest first:
 *
 *   http, config, log ◄ tenancy, store (+ adapters beside it) ◄ catalog ◄ policy ◄ audit, metrics, tracing
 *     ◄ oauth, uma, delegation, authzen ◄ admin ◄ composition root (app, server, main, collections,
 *       migrations, cli/, workers/)
 *
 * A module may import its own layer and those to its left, never one to its right, and no
 * module takes part in an import circle. src/dev-idp (a stand-alone development IdP) imports
 * no other folder and is in no layer. Run by scripts/check-deps.sh.
 */

/** Path patterns of each layer, lowest first. */
const LAYERS = [
  { name: 'base', path: '^src/(http|config|log)/' },
  { name: 'store', path: '^(src/(tenancy|store)/|adapters/)' },
  { name: 'catalog', path: '^src/catalog/' },
  { name: 'policy', path: '^src/policy/' },
  { name: 'audit', path: '^src/(audit|metrics|tracing)/' },
  { name: 'protocol', path: '^src/(oauth|uma|delegation|authzen)/' },
  { name: 'admin', path: '^src/admin/' },
  { name: 'root', path: '^src/((app|server|main|collections|migrations)\\.ts$|cli/|workers/)' },
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
      name: 'no-circular',
      comment: 'An import circle: modules that cannot be read, loaded or tested one before the other.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
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
