import Fastify from 'fastify'
import { describe, expect, test } from 'tstyche'
import fastifyTritonShm, {
  fastifyTritonShm as named, type FastifyTritonShmOptions, type ErrorKind, type Lease, Registry, TritonError,
  type SharedMemoryRegionStatus, type SystemSharedMemoryRegistry, kserveModels, ModelTable, type RestrictedCategory, type RestrictionGroup,
  tritonMetrics, tritonMetricsPlugin
} from '../../lib/index'
import { inferenceServiceHandlers, sharedMemoryService } from '../../lib/grpc'

const app = Fastify()

describe('the plugin', () => {
  test('is the default and a named export', () => {
    expect(named).type.toBe(fastifyTritonShm)
  })

  test('takes every documented option', () => {
    expect(app.register(fastifyTritonShm, {
      prefix: '/triton',
      decorator: 'shm',
      allowClientShm: false,
      restrictedApi: { header: 'x-api-key', value: 'secret' },
      allowKey: /^\/ok_/,
      reservedKeyPrefixes: ['private_'],
      limits: { maxRegions: 1, maxRegionBytes: 2, maxTotalBytes: 3 },
      openapi: { hide: false, systemTags: ['shm'], cudaTags: ['cuda'], operationIdPrefix: 'replica_' },
      logLevel: 'warn'
    })).type.not.toRaiseError()
    expect(app.register(fastifyTritonShm, { allowKey: (key: string) => key.length < 10 })).type.not.toRaiseError()
  })

  test('refuses unknown options and wrong types', () => {
    expect(app.register(fastifyTritonShm, { prefx: '/triton' })).type.toRaiseError()
    expect(app.register(fastifyTritonShm, { allowClientShm: 'no' })).type.toRaiseError()
    expect(app.register(fastifyTritonShm, { limits: { maxRegions: '8' } })).type.toRaiseError()
    expect(app.register(fastifyTritonShm, { restrictedApi: { header: 'x-api-key' } })).type.toRaiseError()
    expect(app.register(fastifyTritonShm, { allowKey: 'prefix' })).type.toRaiseError()
  })

  test('options are a named type', () => {
    expect<FastifyTritonShmOptions>().type.toBeAssignableFrom({ prefix: '/triton' })
  })
})

describe('restricted categories', () => {
  const groups: RestrictionGroup[] = [{ categories: ['model-repository'], header: 'admin-key', value: 'admin-value' }]

  test('are Triton\'s categories', () => {
    expect<RestrictedCategory>().type.toBe<
      'health' | 'metadata' | 'inference' | 'shared-memory' | 'model-config' | 'model-repository' | 'statistics' | 'trace' | 'logging'
    >()
    expect<RestrictionGroup>().type.not.toBeAssignableFrom({ categories: ['model-reposit'], header: 'k', value: 'v' })
    expect<RestrictionGroup>().type.not.toBeAssignableFrom({ categories: ['health'], header: 'k' })
  })

  test('groups are options of the plugin, its gRPC listener, kserveModels and the gRPC services', () => {
    expect(app.register(fastifyTritonShm, { restrictedApis: groups, grpc: { port: 0, restrictedProtocols: groups } })).type.not.toRaiseError()
    expect(app.register(kserveModels, { models: new ModelTable([]), restrictedApis: groups })).type.not.toRaiseError()
    expect(inferenceServiceHandlers).type.toBeCallableWith({ registry: new Registry(), models: new ModelTable([]), server: { name: 'n', version: '' }, restrictedProtocols: groups })
    expect(sharedMemoryService).type.toBeCallableWith(new Registry(), { restrictedProtocols: groups })
  })

  test('refuse what is not a group', () => {
    expect(app.register(fastifyTritonShm, { restrictedApis: { categories: ['health'], header: 'k', value: 'v' } })).type.toRaiseError()
    expect(app.register(kserveModels, { models: new ModelTable([]), restrictedApis: [{ categories: 'health', header: 'k', value: 'v' }] })).type.toRaiseError()
  })
})

// A custom `decorator` name, typed as the README tells users to.
declare module 'fastify' {
  interface FastifyInstance {
    tritonShm: SystemSharedMemoryRegistry
  }
}

describe('the decorator', () => {
  test('types app.systemSharedMemory as the registry', () => {
    expect(app.systemSharedMemory).type.toBe<SystemSharedMemoryRegistry>()
  })

  test('a custom decorator name is typed by the user\'s declare module', () => {
    expect(app.register(fastifyTritonShm, { decorator: 'tritonShm' })).type.not.toRaiseError()
    expect(app.tritonShm).type.toBe<SystemSharedMemoryRegistry>()
    expect(app.tritonShm.acquire('name', 0, 64)).type.toBe<Lease>()
  })

  test('the registry API', () => {
    const registry = app.systemSharedMemory
    expect(registry.register('name', { key: '/key', byteSize: 64 })).type.toBe<void>()
    expect(registry.register('name', { key: '/key', offset: 8, byteSize: 64 })).type.toBe<void>()
    expect(registry.register('name', { key: '/key' })).type.toRaiseError()
    expect(registry.status()).type.toBe<SharedMemoryRegionStatus[]>()
    expect(registry.status('name')).type.toBe<SharedMemoryRegionStatus[]>()
    expect(registry.has('name')).type.toBe<boolean>()
    expect(registry.acquire('name', 0, 64)).type.toBe<Lease>()
    expect(registry.acquire('name', 0n, 64n)).type.toBe<Lease>()
    expect(registry.acquire('name', '0', 64)).type.toRaiseError()
  })

  test('a lease', () => {
    const lease = app.systemSharedMemory.acquire('name', 0, 64)
    expect(lease.buffer).type.toBe<Uint8Array>()
    expect(lease.release()).type.toBe<void>()
    expect(lease).type.not.toHaveProperty('unmap')
  })

  test('a region status has the wire shape', () => {
    expect<SharedMemoryRegionStatus>().type.toBe<{ name: string, key: string, offset: number, byte_size: number }>()
  })
})

describe('the registry without HTTP', () => {
  test('is a class implementing the registry', () => {
    expect(new Registry()).type.toBeAssignableTo<SystemSharedMemoryRegistry>()
    expect(new Registry({ limits: { maxRegions: 4 } })).type.toBeAssignableTo<SystemSharedMemoryRegistry>()
    expect(new Registry({ limits: { maxRegion: 4 } })).type.toRaiseError()
  })
})

describe('errors', () => {
  test('carry a code and a kind, not a transport\'s status', () => {
    expect<TritonError['code']>().type.toBe<string>()
    expect<TritonError['kind']>().type.toBeAssignableTo<ErrorKind>()
    expect<TritonError>().type.toBeAssignableTo<Error>()
    expect<TritonError>().type.not.toHaveProperty('statusCode')
  })
})

describe('the metrics', () => {
  test('take Triton\'s metrics settings as options', () => {
    expect(app.register(tritonMetricsPlugin, { latencyCounters: false, histograms: true, summaries: { quantiles: [0.1, 0.75] } })).type.not.toRaiseError()
    expect(tritonMetrics({ histograms: true, summaries: true })).type.not.toRaiseError()
    expect(app.register(tritonMetricsPlugin, { histograms: 'true' })).type.toRaiseError()
    expect(tritonMetrics({ histogram: true })).type.toRaiseError()
  })
})
