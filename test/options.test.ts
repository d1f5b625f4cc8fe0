/**
 * The plugin's options: each one checked at registration with a message naming it, the decorator
 * name, one registry per Fastify instance, and everything unmapped when the instance closes.
 */
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import fastifyTritonShm, { type FastifyTritonShmOptions, type SystemSharedMemoryRegistry } from '../lib/index'
import { buildApp, SYSTEM } from './helpers/app'
import { assertEmptySuccess, register } from './helpers/http'
import { makeObject, mappingsOf, PAGE_SIZE } from './helpers/shm'

/** Registers the plugin with `options` (possibly ill-typed on purpose) and returns why ready() failed. */
async function readyError (t: Test, options: unknown): Promise<Error> {
  const app = Fastify()
  t.teardown(() => app.close())
  app.register(fastifyTritonShm, options as FastifyTritonShmOptions)
  try {
    await app.ready()
  } catch (error) {
    return error as Error
  }
  throw new Error(`ready() accepted ${String(options)}`)
}

t.test('every option is checked at registration', async (t) => {
  // [options, the option named, the whole message]
  const cases: Array<[unknown, string, string]> = [
    [{ prefix: 5 }, 'prefix', "option 'prefix' must be string"],
    [{ decorator: '' }, 'decorator', "option 'decorator' must NOT have fewer than 1 characters"],
    [{ decorator: 5 }, 'decorator', "option 'decorator' must be string"],
    [{ allowClientShm: 'false' }, 'allowClientShm', "option 'allowClientShm' must be boolean"],
    [{ allowClientShm: 0 }, 'allowClientShm', "option 'allowClientShm' must be boolean"],
    [{ restrictedApi: 'X-Key=secret' }, 'restrictedApi', "option 'restrictedApi' must be object"],
    [{ restrictedApi: { header: 'X-Key' } }, 'restrictedApi', "option 'restrictedApi' must have required property 'value'"],
    [{ restrictedApi: { value: 'secret' } }, 'restrictedApi', "option 'restrictedApi' must have required property 'header'"],
    [{ restrictedApi: { header: 'X Key', value: 'secret' } }, 'restrictedApi.header',
      "option 'restrictedApi.header' must match pattern \"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$\""],
    [{ restrictedApi: { header: '', value: 'secret' } }, 'restrictedApi.header',
      "option 'restrictedApi.header' must match pattern \"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$\""],
    [{ restrictedApi: { header: 'X-Key', value: 5 } }, 'restrictedApi.value', "option 'restrictedApi.value' must be string"],
    [{ restrictedApi: { header: 'X-Key', value: 'secret', values: ['other'] } }, 'restrictedApi.values',
      "unknown option 'restrictedApi.values'"],
    [{ allowKey: '^/fts_' }, 'allowKey', "option 'allowKey' must be a RegExp or a function"],
    [{ allowKey: {} }, 'allowKey', "option 'allowKey' must be a RegExp or a function"],
    [{ allowKey: null }, 'allowKey', "option 'allowKey' must be a RegExp or a function"],
    [{ reservedKeyPrefixes: 'secret_' }, 'reservedKeyPrefixes', "option 'reservedKeyPrefixes' must be array"],
    [{ reservedKeyPrefixes: ['ok_', ''] }, 'reservedKeyPrefixes.1',
      "option 'reservedKeyPrefixes.1' must NOT have fewer than 1 characters"],
    [{ reservedKeyPrefixes: [5] }, 'reservedKeyPrefixes.0', "option 'reservedKeyPrefixes.0' must be string"],
    [{ limits: 5 }, 'limits', "option 'limits' must be object"],
    [{ limits: { maxRegions: 0 } }, 'limits.maxRegions', "option 'limits.maxRegions' must be >= 1"],
    [{ limits: { maxRegions: 1.5 } }, 'limits.maxRegions', "option 'limits.maxRegions' must be integer"],
    [{ limits: { maxRegions: '3' } }, 'limits.maxRegions', "option 'limits.maxRegions' must be integer"],
    [{ limits: { maxRegionBytes: -1 } }, 'limits.maxRegionBytes', "option 'limits.maxRegionBytes' must be >= 1"],
    [{ limits: { maxRegionBytes: 2 ** 53 } }, 'limits.maxRegionBytes',
      "option 'limits.maxRegionBytes' must be <= 9007199254740991"],
    [{ limits: { maxTotalBytes: Infinity } }, 'limits.maxTotalBytes', "option 'limits.maxTotalBytes' must be integer"],
    [{ limits: { maxTotalBytes: 0 } }, 'limits.maxTotalBytes', "option 'limits.maxTotalBytes' must be >= 1"],
    [{ limits: { maxregions: 1 } }, 'limits.maxregions', "unknown option 'limits.maxregions'"],
    [{ sharedRegistry: {} }, 'sharedRegistry', "option 'sharedRegistry' must have required property 'path'"],
    [{ sharedRegistry: { path: '' } }, 'sharedRegistry.path', "option 'sharedRegistry.path' must NOT have fewer than 1 characters"],
    [{ sharedRegistry: { path: 'r.db', checkIntervalMs: 0 } }, 'sharedRegistry.checkIntervalMs', "option 'sharedRegistry.checkIntervalMs' must be >= 1"],
    [{ sharedRegistry: { path: 'r.db', timeout: 5 } }, 'sharedRegistry.timeout', "unknown option 'sharedRegistry.timeout'"],
    [{ allowClientSHM: true }, 'allowClientSHM', "unknown option 'allowClientSHM'"],
    [{ restricted: { header: 'X-Key', value: 'secret' } }, 'restricted', "unknown option 'restricted'"]
  ]
  for (const [options, option, message] of cases) {
    const error = await readyError(t, options)
    t.type(error, TypeError, `${JSON.stringify(options)}: a TypeError`)
    t.equal(error.message, `fastify-triton-shm: ${message}`, `${JSON.stringify(options)} names '${option}'`)
    t.ok(error.message.includes(`'${option}'`))
  }
})

t.test('valid options, every one at once, are accepted', async (t) => {
  const validOptions: FastifyTritonShmOptions[] = [
    {},
    {
      prefix: '/triton',
      decorator: 'tritonShm',
      allowClientShm: false,
      restrictedApi: { header: 'X-Key', value: '' },
      allowKey: /^\/fts_/,
      reservedKeyPrefixes: [],
      limits: { maxRegions: 1, maxRegionBytes: 1, maxTotalBytes: Number.MAX_SAFE_INTEGER }
    },
    { allowKey: (key) => key.length > 3, reservedKeyPrefixes: ['a', 'b'], limits: {} },
    // Fastify's own register options reach the plugin with the others.
    { logLevel: 'warn', logSerializers: {} } as FastifyTritonShmOptions
  ]
  for (const options of validOptions) {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(fastifyTritonShm, options)
    await t.resolves(async () => { await app.ready() }, JSON.stringify(options))
  }
})

t.test('the decorator option renames the decorator', async (t) => {
  const app = await buildApp(t, { decorator: 'tritonShm' })
  t.ok(app.hasDecorator('tritonShm'))
  t.notOk(app.hasDecorator('systemSharedMemory'))
  const registry = (app as unknown as { tritonShm: SystemSharedMemoryRegistry }).tritonShm
  const key = makeObject(t, PAGE_SIZE)
  assertEmptySuccess(t, await register(app, 'r', key, 16))
  t.same(registry.status(), [{ name: 'r', key, offset: 0, byte_size: 16 }], 'the routes serve the renamed registry')
})

t.test('the decorator is visible to the whole app', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm)
  await app.register(async (child) => {
    child.get('/host/regions', async () => child.systemSharedMemory.status().map((region) => region.name))
  })
  const key = makeObject(t, PAGE_SIZE)
  await register(app, 'seen', key, 16)
  const response = await app.inject({ method: 'GET', url: '/host/regions' })
  t.same(response.json(), ['seen'])
})

t.test('a decorator name already taken fails ready()', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  app.decorate('systemSharedMemory', 'taken' as unknown as SystemSharedMemoryRegistry)
  app.register(fastifyTritonShm)
  await t.rejects(async () => { await app.ready() }, { code: 'FST_ERR_DEC_ALREADY_PRESENT' })
})

t.test('two Fastify instances in one process have separate registries', async (t) => {
  const first = Fastify()
  const second = Fastify()
  t.teardown(() => Promise.all([first.close(), second.close()]))
  await first.register(fastifyTritonShm)
  await second.register(fastifyTritonShm)
  const firstKey = makeObject(t, PAGE_SIZE, 'first')
  const secondKey = makeObject(t, PAGE_SIZE, 'second')
  assertEmptySuccess(t, await register(first, 'r', firstKey, 16))
  assertEmptySuccess(t, await register(second, 'r', secondKey, 32))
  assertEmptySuccess(t, await register(second, 'only-second', secondKey, 8))
  t.not(first.systemSharedMemory, second.systemSharedMemory)
  t.same(first.systemSharedMemory.status(), [{ name: 'r', key: firstKey, offset: 0, byte_size: 16 }])
  t.same((await second.inject({ method: 'GET', url: `${SYSTEM}/status` })).json(), [
    { name: 'only-second', key: secondKey, offset: 0, byte_size: 8 },
    { name: 'r', key: secondKey, offset: 0, byte_size: 32 }
  ])

  const secondLease = second.systemSharedMemory.acquire('r', 0, 32)
  assertEmptySuccess(t, await first.inject({ method: 'POST', url: `${SYSTEM}/unregister` }))
  t.same(first.systemSharedMemory.status(), [])
  t.equal(second.systemSharedMemory.status().length, 2, 'unregister-all of one instance leaves the other alone')
  await first.close()
  t.equal(secondLease.buffer.length, 32, 'closing one instance leaves the other\'s mappings mapped')
  secondLease.buffer[0] = 7
  t.equal(secondLease.buffer[0], 7)
  secondLease.release()
})

t.test('onClose unmaps idle regions at once, leased ones when their last lease ends', async (t) => {
  const app = Fastify()
  await app.register(fastifyTritonShm)
  const key = makeObject(t, 2 * PAGE_SIZE)
  for (const [name, offset] of [['idle', 0], ['leased', 100], ['pending', PAGE_SIZE]] as const) {
    assertEmptySuccess(t, await register(app, name, key, 64, offset))
  }
  const leased = app.systemSharedMemory.acquire('leased', 0, 64)
  const pending = app.systemSharedMemory.acquire('pending', 8, 16)
  // Unregistered while leased: stays mapped until its lease ends.
  assertEmptySuccess(t, await app.inject({ method: 'POST', url: `${SYSTEM}/region/pending/unregister` }))
  t.equal(mappingsOf(key).length, 3)

  await app.close()
  t.equal(mappingsOf(key).length, 2, 'the idle region is unmapped at once')
  t.equal(leased.buffer.length, 64, 'a leased view still reads its bytes: its request finishes as it began')
  t.equal(pending.buffer.length, 16)
  leased.release()
  t.equal(leased.buffer.length, 0, 'its last lease ended: unmapped, the view reads as empty')
  pending.release()
  t.equal(pending.buffer.length, 0)
  t.equal(mappingsOf(key).length, 0, 'nothing of the object stays mapped')
  t.same(app.systemSharedMemory.status(), [])
  t.throws(() => app.systemSharedMemory.register('late', { key, byteSize: 64 }),
    { kind: 'unavailable', code: 'ERR_SHM_REGISTRY_CLOSED', message: "cannot register shared memory region 'late': the server is shutting down" },
    'nothing would unmap a region registered after close: refused')
  t.equal(mappingsOf(key).length, 0)
})
