/**
 * The whole of `GRPCInferenceService` this package serves, from the shared memory API and the
 * model table the HTTP routes serve: health, server and model metadata, configuration, statistics,
 * ModelInfer, ModelStreamInfer, TraceSetting, the shared memory RPCs and, given `logging`,
 * LogSettings. RPCs not listed answer UNIMPLEMENTED (grpc-js does).
 */
import type { handleUnaryCall, ServerUnaryCall, UntypedServiceImplementation } from '@grpc/grpc-js'
import type { RestrictedCategory, SystemSharedMemoryRegistry } from '../../types'
import type { InferLimits } from '../../types/kserve'
import type { SharedMemoryServiceOptions, TraceSettingRequest } from '../../types/grpc'
import type { ModelTable } from '../models/model-table'
import type { ServerLogging } from '../models/server-logging'
import { serverMetadata } from '../models/server-metadata'
import { SharedMemoryApi } from '../registry/shared-memory-api'
import { RestrictedFeatures, restrictionGroups } from '../util/restricted-features'
import { logSettingsHandler } from './log-settings-service'
import { modelInferHandler } from './model-infer-handler'
import { modelStreamInferHandler, type OpenStreams } from './model-stream-infer'
import { repositoryHandlers } from './repository-service'
import { restrictedStream, restrictedUnary } from './restricted-calls'
import { sharedMemoryHandlers } from './shared-memory-service'
import { traceSetting } from './trace-service'
import type { ErrorLogger } from './status'
import { unary } from './unary'

/** What the model RPCs serve. */
export interface ModelServiceOptions {
  models: ModelTable
  /** The server's name and version in `ServerMetadata`. */
  server: { name: string, version: string }
  limits?: InferLimits
  /** Where failures that are not the client's are logged. */
  log?: ErrorLogger
  /** Where ModelStreamInfer keeps its streams, to end them with the server (`OpenStreams.close`). */
  streams?: OpenStreams
  /** Serve Triton's logging extension (`LogSettings`) over this: the HTTP routes' `logging`. */
  logging?: ServerLogging
}

export interface InferenceServiceOptions extends SharedMemoryServiceOptions, ModelServiceOptions {
  registry: SystemSharedMemoryRegistry
}

interface ModelRequest { name: string, version: string }

/** Empty means "not given" in proto3. */
const given = (value: string) => value === '' ? undefined : value

/** The handlers over `api` (the plugin's, shared with its HTTP routes) and the model table, each
 * refusing calls its category's restriction refuses (Triton's `--grpc-restricted-protocol`). */
export function inferenceServiceOver (api: SharedMemoryApi, { models, server, limits, log, streams, logging }: ModelServiceOptions,
  restrictions = new RestrictedFeatures([], 'grpc', 'inferenceServiceOver')): UntypedServiceImplementation {
  const restricted = <Request, Response>(category: RestrictedCategory, handler: handleUnaryCall<Request, Response>) =>
    restrictedUnary(restrictions, category, handler, log)
  const rpc = <Request, Response>(category: RestrictedCategory, answer: (request: Request) => Response) =>
    restricted(category, unary((call: ServerUnaryCall<Request, Response>) => answer(call.request), log))
  // With a shared registry, statistics and the repository's state are the whole service's.
  models.serveWith(api.registry)
  const repository = models.servesRepository
    ? Object.fromEntries(Object.entries(repositoryHandlers(models, log)).map(([name, handler]) =>
      [name, restricted('model-repository', handler as handleUnaryCall<unknown, unknown>)]))
    : {}
  // With a shared registry, a change of the logging settings is the whole service's.
  logging?.serveWith(api.registry)
  const logSettings: UntypedServiceImplementation = logging === undefined ? {} : { LogSettings: restricted('logging', logSettingsHandler(logging, log)) }
  return {
    ServerLive: rpc('health', () => ({ live: true })),
    ServerReady: rpc('health', () => ({ ready: models.isReady() })),
    ModelReady: rpc('health', ({ name, version }: ModelRequest) => ({ ready: models.isModelReady(name, given(version)) })),
    ServerMetadata: rpc('metadata', () => serverMetadata(server.name, server.version, { repository: models.servesRepository, logging: logging !== undefined })),
    ModelMetadata: rpc('metadata', ({ name, version }: ModelRequest) => models.metadata(name, given(version))),
    ModelConfig: rpc('model-config', ({ name, version }: ModelRequest) => ({ config: models.config(name, given(version)) })),
    ModelStatistics: rpc('statistics', ({ name, version }: ModelRequest) => models.statistics(given(name), given(version))),
    TraceSetting: rpc('trace', (request: TraceSettingRequest) => traceSetting(models, request)),
    ModelInfer: restricted('inference', modelInferHandler({ registry: api.registry, models, limits, log })),
    ModelStreamInfer: restrictedStream(restrictions, 'inference', modelStreamInferHandler({ registry: api.registry, models, limits, log, streams }), log),
    ...sharedMemoryHandlers(api, log, restrictions),
    ...repository,
    ...logSettings
  }
}

/** The handlers of `GRPCInferenceService`, for a host's own grpc-js server. */
export function inferenceServiceHandlers (options: InferenceServiceOptions): UntypedServiceImplementation {
  const { registry, allowClientShm, restrictedApi, restrictedProtocols, clientShmAccess } = options
  const restrictions = new RestrictedFeatures(restrictionGroups(restrictedProtocols, restrictedApi), 'grpc', 'inferenceServiceHandlers')
  return inferenceServiceOver(new SharedMemoryApi(registry, { allowClientShm, clientShmAccess }), options, restrictions)
}
