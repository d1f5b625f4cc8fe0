/**
 * JSON schemas of the shared memory routes: the OpenAPI description a host's @fastify/swagger
 * publishes, with the seed's operationIds, tags and summaries. The routes validate nothing with
 * them: the core reads every field with Triton's messages.
 */
import type { FastifySchema } from 'fastify'

const SYSTEM_TAG = 'System Shared Memory'
const CUDA_TAG = 'CUDA Shared Memory'
const SUMMARY_PREFIX = 'Triton Inference Server'

/** Left out of a host's OpenAPI document (understood by @fastify/swagger). */
export const HIDDEN = { hide: true } as FastifySchema

const unsignedInteger = (description: string) =>
  ({ type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description }) as const

export const regionStatusSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'Name of the shared memory region' },
    key: { type: 'string', description: 'Shared memory key' },
    offset: { type: 'integer', description: 'Offset in the shared memory region' },
    byte_size: { type: 'integer', description: 'Size of the region in bytes' }
  }
} as const

export const errorResponseSchema = {
  type: 'object',
  properties: {
    error: { type: 'string', description: 'Error message describing what went wrong' }
  }
} as const

const regionNameParams = {
  type: 'object',
  required: ['region_name'],
  properties: {
    region_name: { type: 'string', description: 'Name of the shared memory region' }
  }
} as const

export const registerBodySchema = {
  type: 'object',
  required: ['key', 'byte_size'],
  properties: {
    key: { type: 'string', description: 'Shared memory key' },
    offset: unsignedInteger('Offset within the shared memory region in bytes'),
    byte_size: unsignedInteger('Size of the shared memory region in bytes')
  }
} as const

const errorResponses = (description: string) => ({
  400: { description, ...errorResponseSchema },
  '4xx': { description: 'Region not found, method not allowed, or API restricted', ...errorResponseSchema }
})

const statusResponses = (description: string) => ({
  200: { description, type: 'array', items: regionStatusSchema },
  ...errorResponses('Error retrieving status')
})

const emptyResponses = (success: string, failure: string) => ({
  200: { description: success },
  ...errorResponses(failure)
})

/** The schema of each route of one API family (system or CUDA shared memory). */
export type ApiSchemas = Record<'status' | 'regionStatus' | 'register' | 'unregister' | 'unregisterAll', RouteSchema>

/** A route's schema: validation and response shapes, and how the OpenAPI document shows it. */
export interface RouteSchema { tags: string[], [keyword: string]: unknown }

interface RouteDoc { operationId: string, summary: string, description: string }

function describe (tag: string, { operationId, summary, description }: RouteDoc) {
  return { operationId, tags: [tag], summary: `${SUMMARY_PREFIX} ${summary}`, description }
}

/** Schemas of the system shared memory routes, keyed by route. */
export const systemSchemas: ApiSchemas = {
  status: {
    ...describe(SYSTEM_TAG, {
      operationId: 'systemSharedMemoryStatus',
      summary: 'Get System Shared Memory Status',
      description: 'Retrieve the status of all registered system shared memory regions. ' +
        'This is a Triton extension to the KServe protocol.'
    }),
    response: statusResponses('System shared memory status returned successfully')
  },
  regionStatus: {
    ...describe(SYSTEM_TAG, {
      operationId: 'systemSharedMemoryRegionStatus',
      summary: 'Get the Status of One System Shared Memory Region',
      description: 'Retrieve the status of one registered system shared memory region.'
    }),
    params: regionNameParams,
    response: statusResponses('Region status returned successfully')
  },
  register: {
    ...describe(SYSTEM_TAG, {
      operationId: 'systemSharedMemoryRegister',
      summary: 'Register a System Shared Memory Region',
      description: 'Register a system shared memory region for use with inference requests.'
    }),
    params: regionNameParams,
    body: registerBodySchema,
    response: emptyResponses('Region registered successfully', 'Error registering region')
  },
  unregister: {
    ...describe(SYSTEM_TAG, {
      operationId: 'systemSharedMemoryUnregister',
      summary: 'Unregister a System Shared Memory Region',
      description: 'Unregister a previously registered system shared memory region.'
    }),
    params: regionNameParams,
    response: emptyResponses('Region unregistered successfully', 'Error unregistering region')
  },
  unregisterAll: {
    ...describe(SYSTEM_TAG, {
      operationId: 'systemSharedMemoryUnregisterAll',
      summary: 'Unregister All System Shared Memory Regions',
      description: 'Unregister all registered system shared memory regions.'
    }),
    response: emptyResponses('All regions unregistered successfully', 'Error unregistering regions')
  }
}

/** Schemas of the CUDA shared memory routes: same shapes, answered as a server without GPUs. */
export const cudaSchemas: ApiSchemas = {
  status: {
    ...describe(CUDA_TAG, {
      operationId: 'cudaSharedMemoryStatus',
      summary: 'Get CUDA Shared Memory Status',
      description: 'Retrieve the status of all registered CUDA shared memory regions: always empty, ' +
        'as this server has no GPUs.'
    }),
    response: statusResponses('CUDA shared memory status returned successfully')
  },
  regionStatus: {
    ...describe(CUDA_TAG, {
      operationId: 'cudaSharedMemoryRegionStatus',
      summary: 'Get the Status of One CUDA Shared Memory Region',
      description: 'Retrieve the status of one CUDA shared memory region: never found, as this server has no GPUs.'
    }),
    params: regionNameParams,
    response: statusResponses('Region status returned successfully')
  },
  register: {
    ...describe(CUDA_TAG, {
      operationId: 'cudaSharedMemoryRegister',
      summary: 'Register a CUDA Shared Memory Region',
      description: 'Register a CUDA shared memory region: refused, as this server has no GPUs.'
    }),
    params: regionNameParams,
    response: emptyResponses('Region registered successfully', 'Error registering region')
  },
  unregister: {
    ...describe(CUDA_TAG, {
      operationId: 'cudaSharedMemoryUnregister',
      summary: 'Unregister a CUDA Shared Memory Region',
      description: 'Unregister a CUDA shared memory region: nothing to do, as none can be registered.'
    }),
    params: regionNameParams,
    response: emptyResponses('Region unregistered successfully', 'Error unregistering region')
  },
  unregisterAll: {
    ...describe(CUDA_TAG, {
      operationId: 'cudaSharedMemoryUnregisterAll',
      summary: 'Unregister All CUDA Shared Memory Regions',
      description: 'Unregister all CUDA shared memory regions: nothing to do, as none can be registered.'
    }),
    response: emptyResponses('All regions unregistered successfully', 'Error unregistering regions')
  }
}
