/**
 * Triton's model repository extension over gRPC (`RepositoryIndex`, `RepositoryModelLoad`,
 * `RepositoryModelUnload`), from the model table the HTTP routes serve, with Triton's checks and
 * texts: a repository name is not supported, `config` must be a string_param, `file:...` a
 * bytes_param, `unload_dependents` a bool_param.
 */
import type { sendUnaryData, ServerUnaryCall, UntypedServiceImplementation } from '@grpc/grpc-js'
import type {
  ModelRepositoryParameter, RepositoryIndexRequest, RepositoryIndexResponse, RepositoryModelLoadRequest, RepositoryModelUnloadRequest
} from '../../types/grpc'
import type { ModelLoadOverrides } from '../../types/models'
import * as errors from '../errors'
import type { ModelTable } from '../models/model-table'
import { type ErrorLogger, toServiceError } from './status'

/** A unary handler from a function that may answer asynchronously: its throw becomes the status. */
function unaryAsync<Request, Response> (answer: (request: Request) => Response | Promise<Response>, log?: ErrorLogger) {
  return async (call: ServerUnaryCall<Request, Response>, callback: sendUnaryData<Response>) => {
    let response: Response
    try {
      response = await answer(call.request)
    } catch (error) {
      return callback(toServiceError(error, log))
    }
    callback(null, response)
  }
}

function checkRepositoryName (name: string): void {
  if (name !== '') throw errors.repositoryNameUnsupported()
}

function loadOverrides (parameters: Record<string, ModelRepositoryParameter>): ModelLoadOverrides {
  const overrides: ModelLoadOverrides = { files: {} }
  for (const [name, parameter] of Object.entries(parameters)) {
    if (name === 'config') {
      if (parameter.parameter_choice !== 'string_param') throw errors.invalidLoadParameterType(name, 'string_param')
      overrides.config = parameter.string_param
    } else if (name.startsWith('file:')) {
      if (parameter.parameter_choice !== 'bytes_param') throw errors.invalidLoadParameterType(name, 'bytes_param')
      overrides.files[name] = parameter.bytes_param as Buffer
    } else {
      throw errors.unrecognizedLoadParameter(name)
    }
  }
  return overrides
}

/** The handlers, for a table that serves the model repository extension. */
export function repositoryHandlers (models: ModelTable, log?: ErrorLogger): UntypedServiceImplementation {
  return {
    RepositoryIndex: unaryAsync(({ repository_name: repositoryName, ready }: RepositoryIndexRequest): RepositoryIndexResponse => {
      checkRepositoryName(repositoryName)
      return { models: models.index(ready).map(({ name, version, state, reason = '' }) => ({ name, version, state, reason })) }
    }, log),
    RepositoryModelLoad: unaryAsync(async ({ repository_name: repositoryName, model_name: name, parameters }: RepositoryModelLoadRequest) => {
      checkRepositoryName(repositoryName)
      await models.load(name, loadOverrides(parameters))
      return {}
    }, log),
    RepositoryModelUnload: unaryAsync(async ({ repository_name: repositoryName, model_name: name, parameters }: RepositoryModelUnloadRequest) => {
      checkRepositoryName(repositoryName)
      const unloadDependents = parameters.unload_dependents
      // No model here has dependents: the parameter is checked, and changes nothing.
      if (unloadDependents !== undefined && unloadDependents.parameter_choice !== 'bool_param') throw errors.invalidUnloadDependents('bool_param')
      await models.unload(name)
      return {}
    }, log)
  }
}
