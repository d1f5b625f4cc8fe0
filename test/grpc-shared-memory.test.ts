/**
 * The shared memory RPCs over a real gRPC connection on 127.0.0.1 (grpc-js client and server):
 * SPEC section 7's rows, with section 2's texts and Triton's gRPC codes, on the registry the HTTP
 * routes use.
 */
import { status } from '@grpc/grpc-js'
import t, { type Test } from 'tap'
import { Registry } from '../lib/index'
import * as errors from '../lib/errors'
import type { TritonError } from '../lib/errors'
import { sharedMemoryService, Status, toServiceError } from '../lib/grpc'
import type { SharedMemoryServiceOptions } from '../types/grpc'
import { buildApp, SYSTEM } from './helpers/app'
import { grpcClient, startHostServer, startServer } from './helpers/grpc'
import { register } from './helpers/http'
import { makeObject, PAGE_SIZE, uniqueKey } from './helpers/shm'

async function setup (t: Test, options: SharedMemoryServiceOptions = {}) {
  const app = await buildApp(t)
  const { client } = await startHostServer(t, app.systemSharedMemory, [], options)
  return { app, registry: app.systemSharedMemory, client }
}

t.test('register, status and unregister over gRPC', async (t) => {
  const { registry, client } = await setup(t)
  const key = makeObject(t, 2 * PAGE_SIZE)
  t.same(await client.call('SystemSharedMemoryStatus', {}), { regions: {} }, 'no region: an empty map')
  t.same(await client.call('SystemSharedMemoryRegister', { name: 'input', key, offset: 100, byte_size: 1000 }), {}, 'register: an empty message')
  const region = { name: 'input', key, offset: '100', byte_size: '1000' }
  t.same(await client.call('SystemSharedMemoryStatus', { name: '' }), { regions: { input: region } }, 'every region, by name')
  t.same(await client.call('SystemSharedMemoryStatus', { name: 'input' }), { regions: { input: region } }, 'the named region')
  t.same(registry.status(), [{ name: 'input', key, offset: 100, byte_size: 1000 }], 'in the registry')
  t.same(await client.call('SystemSharedMemoryUnregister', { name: 'input' }), {}, 'unregister: an empty message')
  t.same(registry.status(), [])
  t.same(await client.call('SystemSharedMemoryUnregister', { name: 'nowhere' }), {}, 'an unknown name is OK')

  await client.call('SystemSharedMemoryRegister', { name: 'a', key, byte_size: 8 })
  await client.call('SystemSharedMemoryRegister', { name: 'b', key, byte_size: 8 })
  t.same(await client.call('SystemSharedMemoryUnregister', {}), {}, 'an empty name unregisters every region')
  t.same(registry.status(), [])
})

t.test('every refusal keeps its HTTP text and takes Triton\'s gRPC code', async (t) => {
  const { client } = await setup(t)
  const key = makeObject(t, PAGE_SIZE)
  const refusals: Array<[string, object, number, string]> = [
    ['SystemSharedMemoryStatus', { name: 'nowhere' }, status.NOT_FOUND, "Unable to find system shared memory region: 'nowhere'"],
    ['SystemSharedMemoryRegister', { name: 'r', key: '///', byte_size: 8 }, status.INVALID_ARGUMENT,
      "cannot register shared memory region 'r' - invalid shm key '///'"],
    ['SystemSharedMemoryRegister', { name: 'r', key: '', byte_size: 8 }, status.INVALID_ARGUMENT,
      "cannot register shared memory region 'r' - invalid shm key ''"],
    ['SystemSharedMemoryRegister', { name: 'r', key: '/triton_python_backend_shm_region_1', byte_size: 8 }, status.INVALID_ARGUMENT,
      "cannot register shared memory region 'r' with key '/triton_python_backend_shm_region_1' as the key contains the reserved prefix 'triton_python_backend_shm_region_'"],
    ['SystemSharedMemoryRegister', { name: 'r', key, byte_size: PAGE_SIZE + 1 }, status.INVALID_ARGUMENT,
      "failed to register shared memory region 'r': invalid args"],
    ['SystemSharedMemoryRegister', { name: 'r', key, byte_size: 0 }, status.INVALID_ARGUMENT,
      "failed to register shared memory region 'r': invalid args"],
    ['SystemSharedMemoryRegister', { name: 'r', key, offset: '18446744073709551615', byte_size: 8 }, status.INVALID_ARGUMENT,
      `Shared memory register request field 'offset' must be at most ${Number.MAX_SAFE_INTEGER}: larger integers cannot be represented exactly`],
    ['SystemSharedMemoryRegister', { name: 'r', key, byte_size: '9007199254740993' }, status.INVALID_ARGUMENT,
      `Shared memory register request field 'byte_size' must be at most ${Number.MAX_SAFE_INTEGER}: larger integers cannot be represented exactly`],
    ['SystemSharedMemoryRegister', { name: '', key, byte_size: 8 }, status.INVALID_ARGUMENT,
      "'region name' is necessary to register system shared memory region"],
    ['SystemSharedMemoryRegister', { name: 'r', key: uniqueKey('absent'), byte_size: 8 }, status.INTERNAL,
      /^Unable to open shared memory region: '\/fts_.*_absent'$/ as unknown as string]
  ]
  for (const [method, request, code, message] of refusals) {
    const error = await client.fail(method, request)
    t.equal(error.code, code, `${method} ${JSON.stringify(request)}: code ${status[code]}`)
    t.match(error.details, message, 'the HTTP API\'s text')
  }
  await client.call('SystemSharedMemoryRegister', { name: 'r', key, byte_size: 8 })
  const duplicate = await client.fail('SystemSharedMemoryRegister', { name: 'r', key, byte_size: 8 })
  t.equal(duplicate.code, status.ALREADY_EXISTS, 'a name already registered: ALREADY_EXISTS')
  t.equal(duplicate.details, "shared memory region 'r' already in manager")
})

t.test('CUDA shared memory, as a server without GPUs', async (t) => {
  const { client } = await setup(t)
  t.same(await client.call('CudaSharedMemoryStatus', {}), { regions: {} }, 'status: an empty map')
  const unknown = await client.fail('CudaSharedMemoryStatus', { name: 'gpu' })
  t.equal(unknown.code, status.NOT_FOUND)
  t.equal(unknown.details, "Unable to find cuda shared memory region: 'gpu'")
  const refused = await client.fail('CudaSharedMemoryRegister', { name: 'gpu', raw_handle: Buffer.alloc(64), device_id: 0, byte_size: 64 })
  t.equal(refused.code, status.INVALID_ARGUMENT)
  t.equal(refused.details, "failed to register CUDA shared memory region: 'gpu', GPUs not supported")
  const unnamed = await client.fail('CudaSharedMemoryRegister', { raw_handle: Buffer.alloc(64), byte_size: 64 })
  t.equal(unnamed.details, "failed to register CUDA shared memory region: '', GPUs not supported", 'no name asked for, as Triton\'s gRPC face')
  for (const rawHandle of [undefined, Buffer.alloc(0), Buffer.alloc(63), Buffer.alloc(65)]) {
    const noHandle = await client.fail('CudaSharedMemoryRegister', { name: 'gpu', ...(rawHandle !== undefined && { raw_handle: rawHandle }), byte_size: 64 })
    t.equal(noHandle.code, status.INVALID_ARGUMENT)
    t.equal(noHandle.details, 'failed to register shared memory region: invalid args', `a handle of ${rawHandle?.length ?? 'no'} bytes: CUDA's refusal`)
  }
  t.same(await client.call('CudaSharedMemoryUnregister', { name: 'gpu' }), {}, 'unregister is OK')
  t.same(await client.call('CudaSharedMemoryUnregister', {}), {}, 'unregister all is OK')
})

t.test('allowClientShm: false refuses register and both unregisters with UNIMPLEMENTED; status stays open', async (t) => {
  const { registry, client } = await setup(t, { allowClientShm: false })
  const key = makeObject(t, PAGE_SIZE)
  registry.register('kept', { key, byteSize: 8 })
  const disabled = "Client shared memory is disabled. Register the plugin with 'allowClientShm: true' to enable."
  for (const [method, request] of [
    ['SystemSharedMemoryRegister', { name: 'r', key, byte_size: 8 }],
    ['SystemSharedMemoryUnregister', { name: 'kept' }],
    ['SystemSharedMemoryUnregister', {}],
    ['CudaSharedMemoryRegister', { name: 'gpu', byte_size: 8 }]
  ] as const) {
    const error = await client.fail(method, request)
    t.equal(error.code, status.UNIMPLEMENTED, `${method}: UNIMPLEMENTED`)
    t.equal(error.details, disabled)
  }
  t.same(Object.keys((await client.call('SystemSharedMemoryStatus', {})).regions), ['kept'], 'status answers; nothing changed')
  t.same(await client.call('CudaSharedMemoryUnregister', {}), {}, 'CUDA unregister still answers OK')
})

t.test('restrictedApi: every shared memory RPC needs the metadata header, before anything else', async (t) => {
  const { registry, client } = await setup(t, { allowClientShm: false, restrictedApi: { header: 'X-Shm-Key', value: 'secret' } })
  const key = makeObject(t, PAGE_SIZE)
  const methods = ['SystemSharedMemoryStatus', 'SystemSharedMemoryRegister', 'SystemSharedMemoryUnregister',
    'CudaSharedMemoryStatus', 'CudaSharedMemoryRegister', 'CudaSharedMemoryUnregister']
  for (const metadata of [{} as Record<string, string>, { 'x-shm-key': 'wrong' }, { 'x-shm-key': '' }, { 'x-shm-key': 'secret!' }]) {
    for (const method of methods) {
      const error = await client.fail(method, { name: 'r', key, byte_size: 8 }, metadata)
      t.equal(error.code, status.UNAVAILABLE, `${method} with ${JSON.stringify(metadata)}: UNAVAILABLE`)
      t.equal(error.details, "This protocol is restricted, expecting header 'X-Shm-Key'")
    }
  }
  const allowed = { 'x-shm-key': 'secret' }
  t.same(await client.call('SystemSharedMemoryStatus', {}, allowed), { regions: {} }, 'with the header: served')
  const disabled = await client.fail('SystemSharedMemoryRegister', { name: 'r', key, byte_size: 8 }, allowed)
  t.equal(disabled.code, status.UNIMPLEMENTED, 'then the client shared memory gate')
  t.same(registry.status(), [])
})

t.test('an empty expected value still needs the header', async (t) => {
  const { client } = await setup(t, { restrictedApi: { header: 'x-open', value: '' } })
  t.equal((await client.fail('SystemSharedMemoryStatus', {})).code, status.UNAVAILABLE, 'without it: refused')
  t.same(await client.call('SystemSharedMemoryStatus', {}, { 'x-open': '' }), { regions: {} }, 'with it, empty: served')
})

t.test('one registry: registered over HTTP, seen and unregistered over gRPC, and the reverse', async (t) => {
  const { app, client } = await setup(t)
  const key = makeObject(t, PAGE_SIZE)
  t.equal((await register(app, 'from_http', key, 64)).statusCode, 200)
  t.same((await client.call('SystemSharedMemoryStatus', { name: 'from_http' })).regions.from_http,
    { name: 'from_http', key, offset: '0', byte_size: '64' }, 'gRPC sees the HTTP registration')
  await client.call('SystemSharedMemoryUnregister', { name: 'from_http' })
  await client.call('SystemSharedMemoryRegister', { name: 'from_grpc', key, offset: 8, byte_size: 16 })
  const listed = await app.inject({ method: 'GET', url: `${SYSTEM}/status` })
  t.same(listed.json(), [{ name: 'from_grpc', key, offset: 8, byte_size: 16 }], 'HTTP sees the gRPC registration only')
})

t.test('a registry that fails unexpectedly answers INTERNAL without its message, and logs it', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const broken = Object.assign(Object.create(registry), { status: () => { throw new Error('/secret/path exploded') } })
  const logged: object[] = []
  const port = await startServer(t, sharedMemoryService(broken, {}, { error: (object: object) => logged.push(object) }))
  const error = await grpcClient(t, port).fail('SystemSharedMemoryStatus', {})
  t.equal(error.code, status.INTERNAL)
  t.equal(error.details, 'Internal Server Error', 'nothing of the cause is sent')
  t.equal(logged.length, 1, 'logged once')
})

t.test('the code of every error: ours by its kind (Triton\'s pairs), a host\'s HTTP error by its status', async (t) => {
  t.equal(Status.INVALID_ARGUMENT, status.INVALID_ARGUMENT, 'the wire numbers are grpc-js\'s')
  const ours: Array<[TritonError, number]> = [
    [errors.duplicateRegion('r'), status.ALREADY_EXISTS],
    [errors.unableToOpen('/k'), status.INTERNAL],
    [errors.outputTooSmall('o', 1, 2), status.INTERNAL],
    [errors.restrictedProtocol('x'), status.UNAVAILABLE],
    [errors.clientShmDisabled(), status.UNIMPLEMENTED],
    [errors.clientClosedRequest(), status.CANCELLED],
    [errors.registryClosed('r'), status.UNAVAILABLE],
    [errors.storeFailed(new Error('cause')), status.INTERNAL],
    [errors.regionNotFound('r'), status.NOT_FOUND],
    [errors.invalidOffset('r'), status.INVALID_ARGUMENT]
  ]
  for (const [error, expected] of ours) t.same(toServiceError(error), { code: expected, details: error.message }, error.code)
  const hosts: Array<[number, number]> = [
    [400, status.INVALID_ARGUMENT], [403, status.PERMISSION_DENIED], [404, status.NOT_FOUND], [408, status.INVALID_ARGUMENT],
    [409, status.ALREADY_EXISTS], [413, status.RESOURCE_EXHAUSTED], [429, status.RESOURCE_EXHAUSTED], [499, status.CANCELLED],
    [500, status.INTERNAL], [501, status.UNIMPLEMENTED], [503, status.UNAVAILABLE], [504, status.INTERNAL]
  ]
  for (const [statusCode, expected] of hosts) {
    t.same(toServiceError(Object.assign(new Error('host says no'), { statusCode })), { code: expected, details: 'host says no' }, `HTTP ${statusCode}`)
  }
  t.same(toServiceError(undefined), { code: status.INTERNAL, details: 'Internal Server Error' }, 'a thrown nothing: INTERNAL')
  t.same(toServiceError({ statusCode: 404 }), { code: status.NOT_FOUND, details: undefined }, 'an HTTP error without a message: none passed on')
  t.same(toServiceError(Object.assign(new Error('/a/path'), { statusCode: 200 })), { code: status.INTERNAL, details: 'Internal Server Error' },
    'a status that is no error status: a bug, hidden')
})
