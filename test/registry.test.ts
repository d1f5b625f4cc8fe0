/**
 * The Registry without HTTP, over real shared memory objects: Triton's register rules and
 * messages, status, the four checks of a use (SPEC section 4), leases, deferred unregister
 * (SPEC section 3), close, and logging.
 */
import { writeFileSync } from 'node:fs'
import t, { type Test } from 'tap'
import { TritonError } from '../lib/errors'
import { httpStatusOf } from '../lib/http/error-handler'
import { DEFAULT_RESERVED_KEY_PREFIXES } from '../lib/registry/key-policy'
import { MappedRange } from '../lib/addon/posix-shm'
import { Region, regionStatus } from '../lib/registry/region'
import { DEFAULT_LIMITS, Registry } from '../lib/registry/registry'
import type { Lease, RegistryOptions } from '../types'
import { makeObject, mappingsOf, objectPath, openFdCount, PAGE_SIZE, readObjectFile, uniqueKey, writeObjectFile } from './helpers/shm'
import { makeDirectory, makeFifo } from './helpers/special-objects'

const UINT64_MAX = 2n ** 64n - 1n

/** A registry closed when the test ends. */
function makeRegistry (t: Test, options?: RegistryOptions): Registry {
  const registry = new Registry(options)
  t.teardown(() => registry.close())
  return registry
}

interface LogRecord { level: 'info' | 'debug', object: Record<string, unknown>, message: string }

/** A logger that keeps what it is given. */
function recordingLogger () {
  const records: LogRecord[] = []
  return {
    records,
    logger: {
      info: (object: object, message: string) => { records.push({ level: 'info', object: { ...object }, message }) },
      debug: (object: object, message: string) => { records.push({ level: 'debug', object: { ...object }, message }) }
    }
  }
}

/** `operation` must throw a TritonError answered with exactly this HTTP status and message. */
function throwsShm (t: Test, operation: () => unknown, statusCode: number, message: string, label = message) {
  let thrown: unknown
  try {
    operation()
  } catch (error) {
    thrown = error
  }
  t.type(thrown, TritonError, `${label}: a TritonError`)
  t.equal(httpStatusOf(thrown), statusCode, `${label}: status ${statusCode}`)
  t.equal((thrown as TritonError)?.message, message, `${label}: message`)
}

/** An object whose byte at position p is p & 0xff. */
function patternedObject (t: Test, byteSize: number, label?: string): string {
  const key = makeObject(t, byteSize, label)
  writeFileSync(objectPath(key), Uint8Array.from({ length: byteSize }, (_, position) => position & 0xff))
  return key
}

const invalidArgs = (name: string) => `failed to register shared memory region '${name}': invalid args`
const invalidKey = (name: string, key: string) => `cannot register shared memory region '${name}' - invalid shm key '${key}'`
const unableToOpen = (key: string) => `Unable to open shared memory region: '${key}'`
const useArgs = (name: string) => `shared memory offset and byte size for region '${name}' must be unsigned integers`

t.test('register, status, has, unregister and unregisterAll', async (t) => {
  const registry = makeRegistry(t)
  const key = makeObject(t, 2 * PAGE_SIZE, 'basic')
  t.same(registry.status(), [], 'nothing registered at first')

  registry.register('b', { key, offset: 16, byteSize: 64 })
  registry.register('a', { key, byteSize: 100 })
  registry.register('c', { key, offset: PAGE_SIZE + 3, byteSize: PAGE_SIZE - 3 })
  t.same(registry.status(), [
    { name: 'a', key, offset: 0, byte_size: 100 },
    { name: 'b', key, offset: 16, byte_size: 64 },
    { name: 'c', key, offset: PAGE_SIZE + 3, byte_size: PAGE_SIZE - 3 }
  ], 'every region, sorted by name, offset defaulting to 0')
  t.same(Object.keys(registry.status('b')[0]), ['name', 'key', 'offset', 'byte_size'], 'fields in the seed\'s order')
  t.same(registry.status('b'), [{ name: 'b', key, offset: 16, byte_size: 64 }], 'one region by name')
  t.ok(registry.has('a'))
  t.notOk(registry.has('zz'))
  t.equal(mappingsOf(key).length, 3, 'each registration is its own mapping')

  registry.unregister('b')
  t.notOk(registry.has('b'), 'gone at once without leases')
  t.same(registry.status().map((region) => region.name), ['a', 'c'])
  t.equal(mappingsOf(key).length, 2, 'and unmapped')
  throwsShm(t, () => registry.status('b'), 404, "Unable to find system shared memory region: 'b'")

  t.doesNotThrow(() => registry.unregister('b'), 'unregister of an unknown name is a no-op')
  t.doesNotThrow(() => registry.unregister('never'))
  t.same(registry.status().map((region) => region.name), ['a', 'c'])

  registry.register('b', { key, offset: 8, byteSize: 8 })
  t.same(registry.status('b'), [{ name: 'b', key, offset: 8, byte_size: 8 }], 'the name is free again')

  registry.unregisterAll()
  t.same(registry.status(), [], 'unregisterAll removes every region')
  t.same(mappingsOf(key), [], 'and unmaps them')
  t.doesNotThrow(() => registry.unregisterAll(), 'unregisterAll with nothing registered')
})

t.test('status sorts names by code unit, whatever the registration order', async (t) => {
  const registry = makeRegistry(t)
  const key = makeObject(t, PAGE_SIZE, 'sort')
  const names = ['m', 'a', 'z', 'B', 'b', 'aa', 'é', 'A', 'a b', '0', 'input_data']
  for (const name of names) registry.register(name, { key, byteSize: 1 })
  t.same(registry.status().map((region) => region.name),
    ['0', 'A', 'B', 'a', 'a b', 'aa', 'b', 'input_data', 'm', 'z', 'é'])
  for (const name of names) t.same(registry.status(name).map((region) => region.name), [name])
})

t.test('status of an unknown name is a 404 with Triton\'s message', async (t) => {
  const registry = makeRegistry(t)
  throwsShm(t, () => registry.status('missing'), 404, "Unable to find system shared memory region: 'missing'")
  throwsShm(t, () => registry.status('with space/and slash'), 404,
    "Unable to find system shared memory region: 'with space/and slash'")
  throwsShm(t, () => registry.status(''), 404, "Unable to find system shared memory region: ''")
})

t.test('keys are echoed exactly; one key may back several regions, each its own mapping', async (t) => {
  const registry = makeRegistry(t)
  const key = patternedObject(t, PAGE_SIZE, 'echo')
  const bare = key.replace(/^\/+/, '')
  registry.register('slashes', { key: `///${bare}`, byteSize: 10 })
  registry.register('bare', { key: bare, byteSize: 10 })
  registry.register('one', { key, byteSize: 10 })
  t.same(registry.status().map((region) => region.key), [bare, key, `///${bare}`], 'keys as registered')
  t.equal(mappingsOf(key).length, 3)

  const first = registry.acquire('slashes', 0, 10)
  const second = registry.acquire('bare', 0, 10)
  first.buffer[3] = 0xaa
  t.equal(second.buffer[3], 0xaa, 'the same object under two names')
  first.release()
  second.release()
  registry.unregister('slashes')
  t.equal(mappingsOf(key).length, 2, 'unregistering one name unmaps its mapping only')
  t.equal(registry.acquire('bare', 3, 1).buffer[0], 0xaa, 'the other mappings still work')
})

t.test('register refuses invalid programmatic arguments', async (t) => {
  const { records, logger } = recordingLogger()
  const registry = makeRegistry(t, { logger })
  const key = makeObject(t, PAGE_SIZE, 'args')
  const fdsBefore = openFdCount()
  const loose = registry as unknown as { register (name: unknown, source: unknown): void }

  for (const name of ['', 42, undefined, null, {}]) {
    throwsShm(t, () => loose.register(name, { key, byteSize: 1 }), 400,
      "'region name' is necessary to register system shared memory region", `name ${String(name)}`)
  }
  for (const badKey of [undefined, 42, null, ['/a'], { key }]) {
    throwsShm(t, () => loose.register('r', { key: badKey, byteSize: 1 }), 400,
      "Shared memory register request has no 'key' field", `key ${String(badKey)}`)
  }
  for (const byteSize of [-1, 1.5, Number.NaN, Infinity, 2 ** 53, '64', 64n, undefined, null]) {
    throwsShm(t, () => loose.register('r', { key, byteSize }), 400, invalidArgs('r'), `byteSize ${String(byteSize)}`)
  }
  for (const offset of [-1, 0.5, Number.NaN, -Infinity, 2 ** 53, '0', 0n, null]) {
    throwsShm(t, () => loose.register('r', { key, offset, byteSize: 1 }), 400, invalidArgs('r'), `offset ${String(offset)}`)
  }
  t.throws(() => loose.register('r', undefined), TypeError, 'no source at all')
  t.same(registry.status(), [], 'nothing was registered')
  t.equal(openFdCount(), fdsBefore, 'nothing was opened')
  t.same(mappingsOf(key), [])
  t.ok(records.every((record) => record.level === 'debug'), 'every refusal is logged at debug, nothing at info')
  t.match(records.at(-1), { level: 'debug', object: { region: 'r', key: undefined, reason: /undefined/ } },
    'a missing source is logged too')
})

t.test('register refuses invalid and reserved keys before touching the file system', async (t) => {
  const registry = makeRegistry(t)
  const existing = makeObject(t, PAGE_SIZE, 'keys')
  const fdsBefore = openFdCount()
  const malformed = ['', '/', '///', '.', '/.', '..', '//..', `${existing}/x`, '/a/b', `${existing}\0`, 'a\0b',
    `/${'k'.repeat(255)}`, 'k'.repeat(256), `${'k'.repeat(253)}€`]
  for (const key of malformed) {
    throwsShm(t, () => registry.register('r', { key, byteSize: 1 }), 400, invalidKey('r', key), `key ${JSON.stringify(key.slice(0, 20))}`)
  }
  const reserved = DEFAULT_RESERVED_KEY_PREFIXES[0]
  t.equal(reserved, 'triton_python_backend_shm_region_')
  for (const key of [`/${reserved}1`, `${reserved}x`, `///${reserved}`]) {
    throwsShm(t, () => registry.register('py', { key, byteSize: 1 }), 400,
      `cannot register shared memory region 'py' with key '${key}' as the key contains the reserved prefix '${reserved}'`)
  }
  t.equal(openFdCount(), fdsBefore)
  t.same(registry.status(), [])

  // The longest key accepted is 255 bytes, leading slash included.
  const longest = `/${'k'.repeat(254)}`
  throwsShm(t, () => registry.register('r', { key: longest, byteSize: 1 }), 400, unableToOpen(longest),
    'a 255-byte key reaches shm_open')
  // A key holding the prefix elsewhere than at its start is fine.
  throwsShm(t, () => registry.register('r', { key: `/x${reserved}`, byteSize: 1 }), 400, unableToOpen(`/x${reserved}`))
})

t.test('the host\'s key rules: reserved prefixes and allowKey as a pattern or a function', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'allowed')
  const other = makeObject(t, PAGE_SIZE, 'other')

  const withPrefixes = makeRegistry(t, { reservedKeyPrefixes: ['fts_', 'mine_'] })
  throwsShm(t, () => withPrefixes.register('r', { key, byteSize: 1 }), 400,
    `cannot register shared memory region 'r' with key '${key}' as the key contains the reserved prefix 'fts_'`)
  throwsShm(t, () => withPrefixes.register('r', { key: '/triton_python_backend_shm_region_0', byteSize: 1 }), 400,
    "cannot register shared memory region 'r' with key '/triton_python_backend_shm_region_0' as the key contains the reserved prefix 'triton_python_backend_shm_region_'",
    'the default prefix stays reserved')

  // A global, sticky pattern would answer differently on alternate calls if used as is.
  const byPattern = makeRegistry(t, { allowKey: new RegExp(`^${key}$`, 'gy') })
  byPattern.register('first', { key, byteSize: 1 })
  byPattern.register('second', { key, byteSize: 1 })
  byPattern.register('third', { key, byteSize: 1 })
  t.same(byPattern.status().map((region) => region.name), ['first', 'second', 'third'], 'the same key is allowed every time')
  throwsShm(t, () => byPattern.register('r', { key: other, byteSize: 1 }), 400, invalidKey('r', other))
  throwsShm(t, () => byPattern.register('r', { key: `/${reservedPrefix()}`, byteSize: 1 }), 400,
    `cannot register shared memory region 'r' with key '/${reservedPrefix()}' as the key contains the reserved prefix '${reservedPrefix()}'`,
    'reserved prefixes are checked before the host\'s rule')

  const seen: string[] = []
  const byFunction = makeRegistry(t, {
    allowKey: (candidate) => {
      seen.push(candidate)
      return (candidate === key ? true : 1) as boolean
    }
  })
  byFunction.register('r', { key, byteSize: 1 })
  throwsShm(t, () => byFunction.register('s', { key: other, byteSize: 1 }), 400, invalidKey('s', other),
    'only a rule answering true allows')
  throwsShm(t, () => byFunction.register('t', { key: '/a/b', byteSize: 1 }), 400, invalidKey('t', '/a/b'))
  t.same(seen, [key, other], 'the rule sees the key as sent, and only after the built-in checks')
})

function reservedPrefix (): string {
  return DEFAULT_RESERVED_KEY_PREFIXES[0]
}

t.test('register checks in Triton\'s order: key, duplicate, open, bounds', async (t) => {
  const registry = makeRegistry(t)
  const key = makeObject(t, PAGE_SIZE, 'order')
  const missing = uniqueKey('missing')
  registry.register('taken', { key, offset: 4, byteSize: 8 })

  throwsShm(t, () => registry.register('taken', { key: '/a/b', byteSize: 1 }), 400, invalidKey('taken', '/a/b'),
    'an invalid key before the duplicate')
  throwsShm(t, () => registry.register('taken', { key: missing, byteSize: 1 }), 400,
    "shared memory region 'taken' already in manager", 'the duplicate before the open')
  throwsShm(t, () => registry.register('taken', { key, byteSize: PAGE_SIZE + 1 }), 400,
    "shared memory region 'taken' already in manager", 'the duplicate before the bounds')
  throwsShm(t, () => registry.register('new', { key: missing, byteSize: 0 }), 400, unableToOpen(missing),
    'the open before the bounds')
  t.same(registry.status(), [{ name: 'taken', key, offset: 4, byte_size: 8 }], 'the first registration is unchanged')
})

t.test('register refuses objects it cannot open, non-regular objects and out-of-bounds ranges', async (t) => {
  const { records, logger } = recordingLogger()
  const registry = makeRegistry(t, { logger })
  const size = PAGE_SIZE + 100
  const key = makeObject(t, size, 'bounds')
  const missing = uniqueKey('missing')
  const fifo = makeFifo(t)
  const directory = makeDirectory(t)
  const fdsBefore = openFdCount()

  throwsShm(t, () => registry.register('r', { key: missing, byteSize: 1 }), 400, unableToOpen(missing), 'a missing object')
  throwsShm(t, () => registry.register('r', { key: fifo, byteSize: 1 }), 400, unableToOpen(fifo), 'a fifo')
  throwsShm(t, () => registry.register('r', { key: directory, byteSize: 1 }), 400, unableToOpen(directory), 'a directory')
  for (const [offset, byteSize] of [[0, 0], [0, size + 1], [size - 1, 2], [size, 1], [size + 1, 1], [10 * size, 1]]) {
    throwsShm(t, () => registry.register('r', { key, offset, byteSize }), 400, invalidArgs('r'),
      `offset ${offset} byteSize ${byteSize}`)
  }
  t.same(registry.status(), [])
  t.same(mappingsOf(key), [])
  t.equal(openFdCount(), fdsBefore, 'every descriptor was closed')
  t.equal(records.length, 10, 'a debug line for each refusal, and the hint for the missing object')
  t.same(records[0], {
    level: 'info',
    object: { region: 'r', key: missing },
    message: "system shared memory object does not exist in this server's /dev/shm: most likely the client and the server do not share " +
      '/dev/shm (separate containers without --ipc=host or --ipc=container:<name>, Kubernetes containers without one memory-backed ' +
      'emptyDir mounted at /dev/shm, or another pod or host)'
  })
  t.same(records[1], {
    level: 'debug',
    object: { region: 'r', key: missing, reason: unableToOpen(missing) },
    message: 'refused to register system shared memory region'
  })
  t.notOk(JSON.stringify(records).includes('ENOENT'), 'the cause stays out of the client\'s message')

  registry.register('r', { key, offset: size - 1, byteSize: 1 })
  t.same(registry.status('r'), [{ name: 'r', key, offset: size - 1, byte_size: 1 }], 'the last byte alone fits')
})

t.test('limits: regions, bytes of one region, total bytes (waiting regions count)', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'limits')
  const registry = makeRegistry(t, { limits: { maxRegions: 3, maxRegionBytes: 100, maxTotalBytes: 250 } })
  throwsShm(t, () => registry.register('big', { key, byteSize: 101 }), 400,
    "cannot register shared memory region 'big': byte_size 101 exceeds the server's limit of 100 bytes per region")
  registry.register('a', { key, byteSize: 100 })
  registry.register('b', { key, byteSize: 100 })
  throwsShm(t, () => registry.register('c', { key, byteSize: 51 }), 400,
    "cannot register shared memory region 'c': mapping 51 more bytes would exceed the server's limit of 250 bytes in total")
  registry.register('c', { key, byteSize: 50 })
  throwsShm(t, () => registry.register('d', { key, byteSize: 1 }), 400,
    "cannot register shared memory region 'd': the server allows at most 3 registered regions")

  const lease = registry.acquire('a', 0, 1)
  registry.unregister('a')
  throwsShm(t, () => registry.register('d', { key, byteSize: 1 }), 400,
    "cannot register shared memory region 'd': the server allows at most 3 registered regions",
    'a region waiting for its last lease still counts')
  registry.unregister('c')
  throwsShm(t, () => registry.register('d', { key, byteSize: 51 }), 400,
    "cannot register shared memory region 'd': mapping 51 more bytes would exceed the server's limit of 250 bytes in total",
    'its bytes still count')
  lease.release()
  registry.register('d', { key, byteSize: 100 })
  t.same(registry.status().map((region) => region.name), ['b', 'd'], 'the released region made room')

  const defaults = makeRegistry(t)
  t.same(DEFAULT_LIMITS, { maxRegions: 1024, maxRegionBytes: 16 * 1024 ** 3, maxTotalBytes: 64 * 1024 ** 3 })
  throwsShm(t, () => defaults.register('huge', { key, byteSize: 16 * 1024 ** 3 + 1 }), 400,
    "cannot register shared memory region 'huge': byte_size 17179869185 exceeds the server's limit of 17179869184 bytes per region",
    'the default per-region limit, checked before the object is opened')
  const partial = makeRegistry(t, { limits: { maxRegions: 1 } })
  partial.register('one', { key, byteSize: PAGE_SIZE })
  throwsShm(t, () => partial.register('two', { key, byteSize: 1 }), 400,
    "cannot register shared memory region 'two': the server allows at most 1 registered regions")
})

t.test('acquire runs SPEC section 4\'s checks in order, with Triton\'s messages', async (t) => {
  const registry = makeRegistry(t)
  const key = makeObject(t, PAGE_SIZE, 'checks')
  registry.register('r', { key, offset: 100, byteSize: 64 })
  const rangeMessage = "Invalid offset + byte size for shared memory region: 'r'"
  const offsetMessage = "Invalid offset for shared memory region: 'r'"
  const overflow = (byteSize: bigint | string, offset: bigint | string) =>
    `Integer overflow detected: byte_size (${byteSize}) + offset (${offset}) exceeds maximum value (18446744073709551615) for region 'r'`

  // 1. unknown region, before anything else
  throwsShm(t, () => registry.acquire('nope', 0, 1), 404, "Unable to find shared memory region: 'nope'")
  throwsShm(t, () => registry.acquire('nope', -1, 0.5), 404, "Unable to find shared memory region: 'nope'",
    'unknown region before invalid arguments')
  throwsShm(t, () => registry.acquire('R', 0, 1), 404, "Unable to find shared memory region: 'R'")

  // 2. offset >= registered byte_size (offsets are relative to the registration)
  for (const offset of [64, 65, 100, 163, 2 ** 53, 2 ** 64, 1e300, 64n, UINT64_MAX, 2n ** 70n]) {
    throwsShm(t, () => registry.acquire('r', offset, 1), 400, offsetMessage, `offset ${offset}`)
  }
  throwsShm(t, () => registry.acquire('r', 64, 2 ** 64), 400, offsetMessage, 'offset check before the overflow check')
  throwsShm(t, () => registry.acquire('r', 64, 0), 400, offsetMessage, 'offset check even for byte size 0')

  // 3. byte_size > 2^64-1 - offset: numbers above 2^53 are inexact, but the check still fires
  throwsShm(t, () => registry.acquire('r', 0, 2 ** 64), 400, overflow('18446744073709551616', '0'), '2^64 as a number')
  // eslint-disable-next-line @typescript-eslint/no-loss-of-precision -- the inexact number a client's JSON gives
  throwsShm(t, () => registry.acquire('r', 1, 18446744073709551615), 400, overflow('18446744073709551616', '1'),
    'UINT64_MAX as a number rounds up to 2^64')
  throwsShm(t, () => registry.acquire('r', 63, 2 ** 70), 400, overflow('1180591620717411303424', '63'))
  throwsShm(t, () => registry.acquire('r', 1, 2 ** 64 - 2048), 400, rangeMessage,
    'the largest double below 2^64 does not overflow at offset 1')
  throwsShm(t, () => registry.acquire('r', 8n, 2n ** 64n - 8n), 400, overflow('18446744073709551608', '8'), 'as bigints')
  throwsShm(t, () => registry.acquire('r', 63n, UINT64_MAX), 400, overflow('18446744073709551615', '63'))
  throwsShm(t, () => registry.acquire('r', 1n, UINT64_MAX), 400, overflow('18446744073709551615', '1'))
  throwsShm(t, () => registry.acquire('r', 0n, 2n ** 64n), 400, overflow('18446744073709551616', '0'))
  throwsShm(t, () => registry.acquire('r', 8, 2n ** 64n - 8n), 400, overflow('18446744073709551608', '8'), 'mixed')
  throwsShm(t, () => registry.acquire('r', 8n, 2n ** 64n - 9n), 400, rangeMessage, 'exactly 2^64-1 does not overflow')
  throwsShm(t, () => registry.acquire('r', 0n, UINT64_MAX), 400, rangeMessage, 'UINT64_MAX at offset 0 does not overflow')

  // 4. offset + byte_size > registered byte_size
  for (const [offset, byteSize] of [[0, 65], [1, 64], [63, 2], [32, 33], [0, 2 ** 53], [0, 2 ** 60], [10n, 55n]]) {
    throwsShm(t, () => registry.acquire('r', offset, byteSize), 400, rangeMessage, `offset ${offset} + ${byteSize}`)
  }

  // Within the region: every check passes.
  for (const [offset, byteSize] of [[0, 64], [63, 1], [10, 54], [0n, 64n], [5, 0], [2 ** 5, 2n ** 5n]]) {
    const lease = registry.acquire('r', offset, byteSize)
    t.equal(lease.byteSize, Number(byteSize), `offset ${offset}, byteSize ${byteSize}: leased`)
    lease.release()
  }

  // Not unsigned integers.
  for (const bad of [-1, -0.5, 0.5, 1.5, Number.NaN, Infinity, -Infinity, -1n, '1', null, undefined]) {
    throwsShm(t, () => registry.acquire('r', bad as number, 1), 400, useArgs('r'), `offset ${String(bad)}`)
    throwsShm(t, () => registry.acquire('r', 0, bad as number), 400, useArgs('r'), `byteSize ${String(bad)}`)
  }

  registry.unregister('r')
  t.notOk(registry.has('r'), 'no refused acquire left a lease behind')
  t.same(mappingsOf(key), [])
})

t.test('a lease is exactly the requested slice of the registered bytes, shared with the object', async (t) => {
  const registry = makeRegistry(t)
  const key = patternedObject(t, 2 * PAGE_SIZE, 'slice')
  const regionOffset = PAGE_SIZE - 30 // across a page boundary, not page-aligned
  registry.register('r', { key, offset: regionOffset, byteSize: 200 })

  const lease = registry.acquire('r', 10, 20)
  t.type(lease.buffer, Uint8Array)
  t.equal(lease.buffer.length, 20)
  t.equal(lease.buffer.byteLength, 20)
  t.equal(lease.regionName, 'r')
  t.equal(lease.offset, 10)
  t.equal(lease.byteSize, 20)
  t.same([...lease.buffer], Array.from({ length: 20 }, (_, index) => (regionOffset + 10 + index) & 0xff),
    'the bytes of the object at offset + 10')
  t.equal(lease.buffer[20], undefined, 'nothing past the slice')

  lease.buffer.set([1, 2, 3], 0)
  lease.buffer[19] = 0xfe
  t.same(readObjectFile(key, regionOffset + 10, 3), [1, 2, 3], 'writes through the lease reach the object')
  t.same(readObjectFile(key, regionOffset + 29, 2), [0xfe, (regionOffset + 30) & 0xff], 'and stop at the slice\'s end')
  t.same(readObjectFile(key, regionOffset + 9, 1), [(regionOffset + 9) & 0xff], 'the byte before is untouched')

  writeObjectFile(key, regionOffset + 15, [0x42])
  t.equal(lease.buffer[5], 0x42, 'writes to the object are seen through the lease')

  const big = registry.acquire('r', 10n, 20n)
  t.equal(big.offset, 10, 'bigint arguments give the same slice')
  t.equal(big.byteSize, 20)
  t.equal(big.buffer[0], 1)
  const whole = registry.acquire('r', 0, 200)
  t.equal(whole.buffer[10], 1, 'leases over one region share its bytes')
  whole.buffer[11] = 0x99
  t.equal(lease.buffer[1], 0x99)

  const empty = registry.acquire('r', 199, 0)
  t.equal(empty.buffer.length, 0, 'a zero-byte lease is empty')
  for (const each of [lease, big, whole, empty]) each.release()
})

t.test('deferred unregister: a leased region stays until its last lease ends, then goes exactly once', async (t) => {
  const { records, logger } = recordingLogger()
  const registry = makeRegistry(t, { logger })
  const key = patternedObject(t, PAGE_SIZE, 'deferred')
  registry.register('r', { key, offset: 8, byteSize: 32 })
  const first = registry.acquire('r', 0, 16)
  records.length = 0

  registry.unregister('r')
  t.ok(registry.has('r'), 'still registered')
  t.same(registry.status(), [{ name: 'r', key, offset: 8, byte_size: 32 }], 'still listed like any other')
  t.same(registry.status('r'), [{ name: 'r', key, offset: 8, byte_size: 32 }])
  t.same(records, [{
    level: 'info',
    object: { region: 'r', liveLeases: 1 },
    message: 'system shared memory region will be unregistered when its last lease ends'
  }])
  throwsShm(t, () => registry.register('r', { key, byteSize: 4 }), 400, "shared memory region 'r' already in manager",
    'the name stays taken')
  t.equal(mappingsOf(key).length, 1, 'still mapped')
  t.equal(first.buffer[0], 8, 'the live lease still reads')

  const second = registry.acquire('r', 16, 16)
  t.equal(second.buffer[0], 24, 'new uses can still resolve it')
  registry.unregister('r') // again while waiting: changes nothing
  t.ok(registry.has('r'))

  first.release()
  first.release() // a second release must not count as the other lease's
  t.ok(registry.has('r'), 'one lease still live')
  t.equal(second.buffer[0], 24)
  t.equal(mappingsOf(key).length, 1)

  records.length = 0
  second.release()
  t.notOk(registry.has('r'), 'removed when the last lease ends')
  t.same(registry.status(), [])
  t.same(mappingsOf(key), [], 'and unmapped')
  t.equal(first.buffer.length, 0, 'escaped views read as empty')
  t.equal(second.buffer.length, 0)
  t.same(records, [{
    level: 'info',
    object: { region: 'r', key, byteSize: 32 },
    message: 'unregistered system shared memory region'
  }], 'unmapped and removed once')

  second.release()
  first.release()
  t.equal(records.length, 1, 'late releases do nothing more')

  registry.register('r', { key, byteSize: 4 })
  t.same(registry.status('r'), [{ name: 'r', key, offset: 0, byte_size: 4 }], 'the name is free again')
  const lease = registry.acquire('r', 0, 4)
  lease.release()
  t.ok(registry.has('r'), 'releasing the last lease of a region that is not being unregistered keeps it')
})

t.test('a lease taken after the unregister keeps the region too', async (t) => {
  const registry = makeRegistry(t)
  const key = makeObject(t, PAGE_SIZE, 'late')
  registry.register('r', { key, byteSize: 16 })
  const early = registry.acquire('r', 0, 1)
  registry.unregister('r')
  const late = registry.acquire('r', 1, 1)
  early.release()
  t.ok(registry.has('r'), 'the lease taken while waiting holds it')
  late.buffer[0] = 5
  late.release()
  t.notOk(registry.has('r'))
  t.same(mappingsOf(key), [])
})

t.test('unregisterAll removes free regions at once and leased ones when their leases end', async (t) => {
  const registry = makeRegistry(t)
  const keys = [makeObject(t, PAGE_SIZE, 'all0'), makeObject(t, PAGE_SIZE, 'all1'), makeObject(t, PAGE_SIZE, 'all2')]
  keys.forEach((key, index) => registry.register(`r${index}`, { key, byteSize: 8 }))
  const leases = [registry.acquire('r1', 0, 8), registry.acquire('r2', 0, 8), registry.acquire('r2', 4, 4)]

  registry.unregisterAll()
  t.same(registry.status().map((region) => region.name), ['r1', 'r2'], 'leased regions stay listed')
  t.same(mappingsOf(keys[0]), [], 'the free one is unmapped')
  t.equal(mappingsOf(keys[1]).length, 1)
  throwsShm(t, () => registry.register('r1', { key: keys[0], byteSize: 8 }), 400, "shared memory region 'r1' already in manager")
  registry.register('r0', { key: keys[0], byteSize: 8 })

  leases[0].release()
  t.same(registry.status().map((region) => region.name), ['r0', 'r2'])
  t.same(mappingsOf(keys[1]), [])
  leases[1].release()
  t.ok(registry.has('r2'))
  leases[2].release()
  t.same(registry.status().map((region) => region.name), ['r0'], 'the region registered meanwhile stays')
  t.same(mappingsOf(keys[2]), [])
})

t.test('close unmaps idle regions at once and leased ones at their last release; register is refused after', async (t) => {
  const { records, logger } = recordingLogger()
  const registry = makeRegistry(t, { logger })
  const key = patternedObject(t, PAGE_SIZE, 'close')
  registry.register('pending', { key, offset: 1, byteSize: 16 })
  registry.register('leased', { key, offset: 2, byteSize: 16 })
  registry.register('free', { key, offset: 3, byteSize: 16 })
  const pendingLease = registry.acquire('pending', 0, 16)
  const leasedLease = registry.acquire('leased', 0, 16)
  registry.unregister('pending')
  t.equal(mappingsOf(key).length, 3)

  registry.close()
  t.same(registry.status().map((region) => region.name), ['leased', 'pending'], 'leased regions stay listed until released')
  t.notOk(registry.has('free'))
  t.equal(mappingsOf(key).length, 2, 'the idle region is unmapped at once')
  t.same([...leasedLease.buffer.subarray(0, 4)], [2, 3, 4, 5], 'a lease taken before close still reads its bytes')
  throwsShm(t, () => registry.register('free', { key, offset: 3, byteSize: 16 }), 503,
    "cannot register shared memory region 'free': the server is shutting down")
  throwsShm(t, () => registry.register('other', { key, byteSize: 8 }), 503,
    "cannot register shared memory region 'other': the server is shutting down")
  t.equal(registry.counters().rejections.ERR_SHM_REGISTRY_CLOSED, 2, 'refusals after close are counted')

  records.length = 0
  pendingLease.release()
  leasedLease.release()
  t.same(registry.status(), [], 'each region went with its last lease')
  t.same(mappingsOf(key), [])
  for (const lease of [pendingLease, leasedLease]) t.equal(lease.buffer.length, 0, `${lease.regionName}: the view reads as empty`)
  t.same(records.map((record) => record.message), ['unregistered system shared memory region', 'unregistered system shared memory region'])

  t.doesNotThrow(() => registry.close(), 'close is idempotent')
  t.same(mappingsOf(key), [])
})

t.test('the logger gets registers and unregisters at info, refusals at debug', async (t) => {
  const { records, logger } = recordingLogger()
  const registry = makeRegistry(t, { logger })
  const key = makeObject(t, PAGE_SIZE, 'log')

  registry.register('r', { key, offset: 3, byteSize: 10 })
  t.same(records, [{
    level: 'info',
    object: { region: 'r', key, offset: 3, byteSize: 10 },
    message: 'registered system shared memory region'
  }])
  records.length = 0
  registry.register('d', { key, byteSize: 1 })
  t.same(records[0].object, { region: 'd', key, offset: 0, byteSize: 1 }, 'the default offset is logged')

  records.length = 0
  t.throws(() => registry.register('r', { key, byteSize: 1 }))
  t.throws(() => registry.register('x', { key: '/', byteSize: 1 }))
  t.same(records, [
    {
      level: 'debug',
      object: { region: 'r', key, reason: "shared memory region 'r' already in manager" },
      message: 'refused to register system shared memory region'
    },
    {
      level: 'debug',
      object: { region: 'x', key: '/', reason: "cannot register shared memory region 'x' - invalid shm key '/'" },
      message: 'refused to register system shared memory region'
    }
  ])

  records.length = 0
  registry.unregister('r')
  registry.unregister('unknown')
  t.same(records, [{
    level: 'info',
    object: { region: 'r', key, byteSize: 10 },
    message: 'unregistered system shared memory region'
  }], 'unregister of an unknown name logs nothing')

  records.length = 0
  t.throws(() => registry.acquire('d', 5, 1))
  t.throws(() => registry.acquire('nope', 0, 1))
  t.same(records, [], 'refused uses are the caller\'s to log')
})

t.test('without a logger the registry stays silent and works', async (t) => {
  const registry = makeRegistry(t)
  const key = makeObject(t, PAGE_SIZE, 'silent')
  registry.register('r', { key, byteSize: 8 })
  t.throws(() => registry.register('r', { key, byteSize: 8 }))
  const lease = registry.acquire('r', 0, 8)
  registry.unregister('r')
  lease.release()
  t.notOk(registry.has('r'))
  const defaults = new Registry()
  defaults.register('r', { key, byteSize: 8 })
  t.ok(defaults.has('r'))
  defaults.close()
  t.same(mappingsOf(key), [])
})

t.test('Region: one mapping, its leases and its close', async (t) => {
  const key = patternedObject(t, PAGE_SIZE, 'region')
  const mapping = new MappedRange(key, 7, 20)
  const record = { id: 1, name: 'r', key, offset: 7, byteSize: 20, object: mapping.object, unregisterPending: false }
  const region = new Region(record, mapping)
  t.teardown(() => region.close())
  t.equal(region.record, record)
  t.same(regionStatus(record), { name: 'r', key, offset: 7, byte_size: 20 })
  t.equal(mappingsOf(key).length, 1, 'mapped')
  t.equal(region.liveLeases, 0)
  const view = region.view(2, 5)
  t.same([...view], [9, 10, 11, 12, 13])

  region.hold()
  region.hold()
  t.equal(region.liveLeases, 2)
  t.equal(region.letGo(), false, 'not the last lease')
  t.equal(region.letGo(), true, 'the last lease here')

  region.close()
  t.equal(view.length, 0)
  t.same(mappingsOf(key), [])
  t.doesNotThrow(() => region.close(), 'a second close is harmless')
})

t.test('leases and registrations in flight across many regions keep their counts straight', async (t) => {
  const registry = makeRegistry(t)
  const key = makeObject(t, PAGE_SIZE, 'many')
  const leases: Lease[] = []
  for (let index = 0; index < 20; index++) {
    registry.register(`r${index}`, { key, offset: index, byteSize: 64 })
    for (let use = 0; use <= index % 3; use++) leases.push(registry.acquire(`r${index}`, use, 1))
  }
  registry.unregisterAll()
  t.equal(registry.status().length, 20, 'every region is leased, so every region waits')
  for (const lease of leases.reverse()) lease.release()
  t.same(registry.status(), [])
  t.same(mappingsOf(key), [])
})
