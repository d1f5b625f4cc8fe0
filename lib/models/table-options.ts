/** The options of a model table besides its models, checked when the table is made. */
import * as errors from '../errors'
import { describeOptionProblem, validatorOf } from '../util/options-validator'
import type { ModelRepositoryOptions, RepositoryLogger } from './model-repository'

export interface ModelTableOptions {
  /** Serve Triton's model repository extension (index, load, unload) from this table, over HTTP
   * and gRPC alike; `GET /v2` then lists `model_repository`. Default false. */
  repository?: boolean | ModelRepositoryOptions
  /** With a shared registry, count statistics in this process only (as without one). Default
   * false: every process's requests count in every process's answers. */
  processStatistics?: boolean
  /** Where the failures of `load` and `unload` hooks that no request reports are logged. */
  log?: RepositoryLogger
}

const problemOf = validatorOf({
  type: 'object',
  additionalProperties: false,
  properties: {
    repository: {
      anyOf: [
        { type: 'boolean' },
        { type: 'object', additionalProperties: false, properties: { allowOverrides: { type: 'boolean' } } }
      ]
    },
    processStatistics: { type: 'boolean' },
    log: { type: 'object', required: ['error'], properties: { error: { isFunction: true } } }
  }
})

/** Returns the options if they are valid; throws `ERR_SHM_INVALID_OPTION` naming the wrong one otherwise. */
export function checkTableOptions (options: ModelTableOptions): ModelTableOptions {
  const problem = problemOf(options)
  if (problem !== undefined) throw errors.invalidOption('fastify-triton-shm model table', describeOptionProblem(problem))
  return options
}
