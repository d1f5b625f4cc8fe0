'use strict'

/**
 * The package's layers, checked by `npm run lint:deps` (part of `npm test`). Imports only point
 * down, from the faces to the core:
 *
 *   lib/index.ts, lib/plugin*.ts       the entry and the plugin
 *   lib/http/, lib/grpc/               the faces: the only importers of fastify and grpc-js
 *   lib/metrics/                       Triton's Prometheus metrics, read from the model table
 *   lib/onnxruntime/, lib/client/      the runner, the client
 *   lib/models/                        the model table
 *   lib/kserve/                        the request/response model
 *   lib/registry/                      the registry and the shared memory API's rules
 *   lib/store/                         where a registry's records live
 *   lib/addon/                         typed faces of the native addon
 *   lib/http2/                         HTTP/2's framing and HPACK, the package's own
 *   lib/util/, lib/errors.ts           what every layer may use
 *
 * and `types/` (the wire and contract shapes) imports nothing of `lib/`.
 */

/** The layers from the top down; each may import only the ones after it. */
const LAYERS = [
  ['entry', '^lib/(index\\.ts|index\\.mts|plugin\\.ts|plugin-options\\.ts)$'],
  ['faces', '^lib/(http|grpc)/'],
  ['metrics', '^lib/metrics/'],
  ['runner and client', '^lib/(onnxruntime|client)/'],
  ['models', '^lib/models/'],
  ['kserve', '^lib/kserve/'],
  ['registry', '^lib/registry/'],
  ['store', '^lib/store/'],
  ['addon', '^lib/addon/'],
  ['http2', '^lib/http2/'],
  ['util', '^lib/(util/|errors\\.ts$)']
]

const layerRules = LAYERS.slice(1).map(([name, path], index) => ({
  name: `no-import-up-from-${name.replaceAll(' ', '-')}`,
  comment: `${name} imports only the layers below it`,
  severity: 'error',
  from: { path },
  to: { path: LAYERS.slice(0, index + 1).map(([, above]) => above) }
}))

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'no import cycles in lib/, types/ or bench/',
      severity: 'error',
      from: { path: '^(lib|types|bench)/' },
      to: { circular: true }
    },
    {
      name: 'types-import-no-lib',
      comment: 'types/ holds wire and contract shapes only: it imports nothing of lib/',
      severity: 'error',
      from: { path: '^types/' },
      to: { path: '^lib/' }
    },
    {
      name: 'only-faces-import-transports',
      comment: 'fastify and grpc-js are imported by the faces (lib/http, lib/grpc) and the plugin only',
      severity: 'error',
      from: { path: '^lib/', pathNot: '^lib/(http/|grpc/|plugin\\.ts$)' },
      to: { path: 'node_modules/(fastify|fastify-plugin|@grpc/[^/]+)/' }
    },
    {
      name: 'no-unresolvable',
      comment: 'every import resolves',
      severity: 'error',
      from: { path: '^(lib|types)/' },
      to: { couldNotResolve: true }
    },
    ...layerRules
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|build|coverage)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] }
  }
}
