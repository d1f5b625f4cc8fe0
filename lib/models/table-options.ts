/** The options of a model table besides its models, checked when the table is made. */
import * as errors from '../errors'
import { describeOptionProblem, validatorOf } from '../util/options-validator'
import type { ModelRepositoryOptions, RepositoryLogger } from './model-repository'
import type { TraceOptions } from './trace-settings'

export interface ModelTableOptions {
  /** Serve Triton's model repository extension (index, load, unload) from this table, over HTTP
   * and gRPC alike; `GET /v2` then lists `model_repository`. Default false. */
  repository?: boolean | ModelRepositoryOptions
  /** With a shared registry, count statistics in this process only (as without one). Default
   * false: every process's requests count in every process's answers. */
  processStatistics?: boolean
  /** Where the failures of `load` and `unload` hooks that no request reports are logged. */
  log?: RepositoryLogger
  /** Triton's trace settings the table starts with (its `--trace-config`); clients change them
   * through the trace extension. Default: tracing off. */
  trace?: TraceOptions
}

const TABLE = 'fastify-triton-shm model table'

const problemOf = validatorOf({
  type: 'object',
  additionalProperties: false,
  properties: {
    repository: {
      // An object's own problem is named, not that it is no boolean.
      if: { type: 'object' },
      then: {
        type: 'object',
        additionalProperties: false,
        properties: {
          allowOverrides: { type: 'boolean' },
          controlMode: { enum: ['none', 'explicit'] },
          startupModels: { type: 'array', items: { type: 'string' } }
        }
      },
      else: { type: 'boolean' }
    },
    processStatistics: { type: 'boolean' },
    trace: {
      type: 'object',
      additionalProperties: false,
      properties: {
        level: { type: 'array', uniqueItems: true, items: { enum: ['TIMESTAMPS', 'TENSORS'] } },
        rate: { type: 'integer', minimum: 0, maximum: 4294967295 },
        count: { type: 'integer', minimum: -1, maximum: 2147483647 },
        logFrequency: { type: 'integer', minimum: 0, maximum: 4294967295 },
        file: { type: 'string' },
        mode: { enum: ['triton', 'opentelemetry'] },
        load: { isFunction: true }
      }
    },
    log: { type: 'object', required: ['error'], properties: { error: { isFunction: true } } }
  }
})

/** Returns the options of a table of the models `declared` if they are valid; throws
 * `ERR_SHM_INVALID_OPTION` naming the wrong one otherwise. */
export function checkTableOptions (options: ModelTableOptions, declared: string[]): ModelTableOptions {
  const problem = problemOf(options)
  if (problem !== undefined) throw errors.invalidOption(TABLE, describeOptionProblem(problem))
  const { repository } = options
  if (typeof repository !== 'object' || repository.startupModels === undefined) return options
  const { controlMode, startupModels } = repository
  // As Triton refuses --load-model without --model-control-mode=explicit.
  if (controlMode === 'none') {
    throw errors.invalidOption(TABLE, "option 'repository.startupModels' needs option 'repository.controlMode' to be 'explicit'")
  }
  const undeclared = startupModels.find((name) => !declared.includes(name))
  if (undeclared !== undefined) throw errors.invalidOption(TABLE, `option 'repository.startupModels' names '${undeclared}', which the table does not declare`)
  return options
}
