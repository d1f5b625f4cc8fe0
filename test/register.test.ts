/**
 * SPEC section 2: registering a region over HTTP, in the order of the section: body validation,
 * key validation, duplicates, opening the object, bounds, mapping at any offset, limits, and the
 * key options. Every refused request must leave the registry exactly as it was.
 */
import { rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import type { FastifyTritonShmOptions } from '../lib/index'
import { createObject } from '../lib/addon/posix-shm'
import { buildApp, registerBody } from './helpers/app'
import { assertEmptySuccess, assertError, register, registerRaw } from './helpers/http'
import {
  makeObject, mappingsOf, objectPath, openFdCount, PAGE_SIZE, readObjectFile, uniqueKey, unlinkOnTeardown, writeObjectFile
} from './helpers/shm'
import { makeDirectory, makeFifo, makeSymlink } from './helpers/special-objects'

const MAX_SAFE = Number.MAX_SAFE_INTEGER
const RESERVED = 'triton_python_backend_shm_region_'

/** Sends a register request that must be refused, and checks that no region changed. */
async function refused (t: Test, app: FastifyInstance, name: string, body: unknown, statusCode: number,
  message: string): Promise<void> {
  const before = app.systemSharedMemory.status()
  const payload = typeof body === 'string' || body === undefined ? body : JSON.stringify(body)
  assertError(t, await registerRaw(app, name, payload), statusCode, message)
  t.same(app.systemSharedMemory.status(), before, 'the registry is unchanged')
}

/** An app that already holds one region, so that "unchanged" means more than "still empty". */
async function appWithOneRegion (t: Test, options: FastifyTritonShmOptions = {}) {
  const app = await buildApp(t, options)
  const key = makeObject(t, 4 * PAGE_SIZE)
  assertEmptySuccess(t, await register(app, 'existing', key, 64))
  return { app, key }
}

const missingKey = "Shared memory register request has no 'key' field"
const missingByteSize = "Shared memory register request has no 'byte_size' field"
const notAnObject = 'Shared memory register request is invalid: the body must be a JSON object'
const mustBeString = (field: string) => `Shared memory register request field '${field}' must be a string`
const mustBeUnsigned = (field: string) => `Shared memory register request field '${field}' must be an unsigned integer`
const tooLargeToBeExact = (field: string) => `Shared memory register request field '${field}' must be at most ` +
  `${MAX_SAFE}: larger integers cannot be represented exactly`
const invalidKey = (name: string, key: string) => `cannot register shared memory region '${name}' - invalid shm key '${key}'`
const reservedKey = (name: string, key: string, prefix: string) =>
  `cannot register shared memory region '${name}' with key '${key}' as the key contains the reserved prefix '${prefix}'`
const invalidArgs = (name: string) => `failed to register shared memory region '${name}': invalid args`
const unableToOpen = (key: string) => `Unable to open shared memory region: '${key}'`

t.test('2. the body', async (t) => {
  const { app, key } = await appWithOneRegion(t)

  t.test('a missing key is refused with Triton\'s message', async (t) => {
    await refused(t, app, 'r', { byte_size: 64 }, 400, missingKey)
    await refused(t, app, 'r', { offset: 0, byte_size: 64 }, 400, missingKey)
    await refused(t, app, 'r', {}, 400, missingKey)
  })

  t.test('a missing byte_size is refused with Triton\'s message', async (t) => {
    await refused(t, app, 'r', { key }, 400, missingByteSize)
    await refused(t, app, 'r', { key, offset: 0 }, 400, missingByteSize)
  })

  t.test('a body that is not a JSON object is refused', async (t) => {
    for (const body of [undefined, 'null', '[]', '"text"', '42', 'true', `[${registerBody(key, 64)}]`]) {
      await refused(t, app, 'r', body, 400, notAnObject)
    }
  })

  t.test('a key that is not a string is a 400', async (t) => {
    for (const wrong of [5, null, true, {}, [key]]) {
      await refused(t, app, 'r', { key: wrong, byte_size: 64 }, 400, mustBeString('key'))
    }
  })

  t.test('strings and other non-numbers are never coerced to numbers', async (t) => {
    for (const wrong of ['64', '0x40', '', true, null, [64], { value: 64 }]) {
      await refused(t, app, 'r', { key, byte_size: wrong }, 400, mustBeUnsigned('byte_size'))
      await refused(t, app, 'r', { key, offset: wrong, byte_size: 64 }, 400, mustBeUnsigned('offset'))
    }
  })

  t.test('negative and fractional numbers are refused', async (t) => {
    for (const wrong of [-1, -4096, 1.5, 0.1, 63.999]) {
      await refused(t, app, 'r', { key, byte_size: wrong }, 400, mustBeUnsigned('byte_size'))
      await refused(t, app, 'r', { key, offset: wrong, byte_size: 64 }, 400, mustBeUnsigned('offset'))
    }
  })

  t.test('integers above 2^53-1 are refused with a clear message, never rounded', async (t) => {
    // Written out as JSON text: JavaScript could not even hold some of them exactly.
    for (const huge of ['9007199254740992', '9007199254740993', '18446744073709551615', '1e308']) {
      await refused(t, app, 'r', `{"key":${JSON.stringify(key)},"byte_size":${huge}}`, 400, tooLargeToBeExact('byte_size'))
      await refused(t, app, 'r', `{"key":${JSON.stringify(key)},"offset":${huge},"byte_size":64}`, 400,
        tooLargeToBeExact('offset'))
    }
  })

  t.test('non-finite numbers are refused', async (t) => {
    // 1e400 parses as Infinity.
    await refused(t, app, 'r', `{"key":${JSON.stringify(key)},"byte_size":1e400}`, 400, mustBeUnsigned('byte_size'))
    await refused(t, app, 'r', `{"key":${JSON.stringify(key)},"offset":-1e400,"byte_size":64}`, 400, mustBeUnsigned('offset'))
  })

  t.test('2^53-1 itself passes validation and reaches the later checks', async (t) => {
    await refused(t, app, 'r', { key, byte_size: MAX_SAFE }, 400,
      `cannot register shared memory region 'r': byte_size ${MAX_SAFE} exceeds the server's limit of 17179869184 bytes per region`)
    await refused(t, app, 'r', { key, offset: MAX_SAFE, byte_size: 1 }, 400, invalidArgs('r'))
  })

  t.test('offset defaults to 0', async (t) => {
    writeObjectFile(key, 0, Uint8Array.of(0xab, 0xcd))
    assertEmptySuccess(t, await registerRaw(app, 'no-offset', JSON.stringify({ key, byte_size: 2 })))
    t.same(app.systemSharedMemory.status('no-offset'), [{ name: 'no-offset', key, offset: 0, byte_size: 2 }])
    const lease = app.systemSharedMemory.acquire('no-offset', 0, 2)
    t.same([...lease.buffer], [0xab, 0xcd], 'the region starts at byte 0 of the object')
    lease.release()
  })

  t.test('fields Triton does not know are ignored', async (t) => {
    assertEmptySuccess(t, await registerRaw(app, 'extra', JSON.stringify({ key, byte_size: 8, device_id: 0, extra: 'x' })))
    t.ok(app.systemSharedMemory.has('extra'))
  })
})

t.test('3. key validation, before anything touches the file system', async (t) => {
  const { app, key } = await appWithOneRegion(t)
  const bare = key.replace(/^\/+/, '')

  t.test('an empty key, or one made only of slashes, is invalid', async (t) => {
    for (const wrong of ['', '/', '///']) await refused(t, app, 'r', { key: wrong, byte_size: 64 }, 400, invalidKey('r', wrong))
  })

  t.test('a reserved prefix is refused, also behind leading slashes, even if the object exists', async (t) => {
    const reservedKey0 = `/${RESERVED}${bare}`
    createObject(reservedKey0, PAGE_SIZE)
    unlinkOnTeardown(t, reservedKey0)
    for (const sent of [reservedKey0, reservedKey0.slice(1), `///${reservedKey0.slice(1)}`]) {
      await refused(t, app, 'py', { key: sent, byte_size: 64 }, 400, reservedKey('py', sent, RESERVED))
    }
  })

  t.test('a prefix that is not at the start of the object name is no reserved prefix', async (t) => {
    const inner = makeObject(t, PAGE_SIZE, RESERVED)
    assertEmptySuccess(t, await register(app, 'inner', inner, 64))
    t.ok(app.systemSharedMemory.has('inner'))
  })

  t.test('a slash after the leading slashes is invalid', async (t) => {
    for (const wrong of [`${key}/x`, `/dir/${bare}`, `dir/${bare}`, `//${bare}/`, `/../${bare}`]) {
      await refused(t, app, 'r', { key: wrong, byte_size: 64 }, 400, invalidKey('r', wrong))
    }
  })

  t.test('a NUL byte is invalid, even when what precedes it names an existing object', async (t) => {
    for (const wrong of [`${key}\u0000`, `${key}\u0000suffix`, `\u0000${bare}`]) {
      await refused(t, app, 'r', { key: wrong, byte_size: 64 }, 400, invalidKey('r', wrong))
    }
  })

  t.test('keys longer than 255 bytes are invalid; 255 bytes are allowed', async (t) => {
    for (const wrong of ['k'.repeat(256), `/${'k'.repeat(255)}`, 'é'.repeat(128)]) {
      await refused(t, app, 'r', { key: wrong, byte_size: 64 }, 400, invalidKey('r', wrong))
    }
    // Past key validation, a 255-byte key that names nothing fails to open instead.
    for (const allowed of ['k'.repeat(255), `/${'k'.repeat(254)}`, `${'é'.repeat(127)}k`]) {
      await refused(t, app, 'r', { key: allowed, byte_size: 64 }, 400, unableToOpen(allowed))
    }
  })

  t.test('"." and ".." are invalid', async (t) => {
    for (const wrong of ['.', '..', '/.', '//..']) {
      await refused(t, app, 'r', { key: wrong, byte_size: 64 }, 400, invalidKey('r', wrong))
    }
  })

  t.test('the key is checked before the duplicate name', async (t) => {
    await refused(t, app, 'existing', { key: '..', byte_size: 64 }, 400, invalidKey('existing', '..'))
  })
})

t.test('4. names', async (t) => {
  t.test('a duplicate name is refused, whatever the key, offset or size', async (t) => {
    const { app, key } = await appWithOneRegion(t)
    const other = makeObject(t, PAGE_SIZE)
    const duplicate = "shared memory region 'existing' already in manager"
    await refused(t, app, 'existing', { key, byte_size: 64 }, 400, duplicate)
    await refused(t, app, 'existing', { key: other, offset: 8, byte_size: 16 }, 400, duplicate)
    // Checked before the object is opened.
    await refused(t, app, 'existing', { key: uniqueKey('missing'), byte_size: 16 }, 400, duplicate)
    t.same(app.systemSharedMemory.status(), [{ name: 'existing', key, offset: 0, byte_size: 64 }])
  })

  t.test('a name is free again once unregistered', async (t) => {
    const { app } = await appWithOneRegion(t)
    const other = makeObject(t, PAGE_SIZE)
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: '/v2/systemsharedmemory/region/existing/unregister' }))
    assertEmptySuccess(t, await register(app, 'existing', other, 32, 4))
    t.same(app.systemSharedMemory.status(), [{ name: 'existing', key: other, offset: 4, byte_size: 32 }])
  })

  t.test('the same key under several names is allowed, each its own mapping', async (t) => {
    const app = await buildApp(t)
    const key = makeObject(t, 2 * PAGE_SIZE)
    assertEmptySuccess(t, await register(app, 'one', key, 64))
    assertEmptySuccess(t, await register(app, 'two', key, 64, PAGE_SIZE))
    assertEmptySuccess(t, await register(app, 'three', key, 64))
    t.equal(mappingsOf(key).length, 3, 'three mappings of the object')
    const one = app.systemSharedMemory.acquire('one', 0, 4)
    const three = app.systemSharedMemory.acquire('three', 0, 4)
    one.buffer.set([1, 2, 3, 4])
    t.same([...three.buffer], [1, 2, 3, 4], 'both map the same shared bytes')
    one.release()
    three.release()
    assertEmptySuccess(t, await app.inject({ method: 'POST', url: '/v2/systemsharedmemory/region/one/unregister' }))
    t.equal(mappingsOf(key).length, 2, 'unregistering one name unmaps only its own mapping')
    const stillThere = app.systemSharedMemory.acquire('three', 0, 4)
    t.same([...stillThere.buffer], [1, 2, 3, 4])
    stillThere.release()
  })
})

t.test('5. opening the object', async (t) => {
  const { app } = await appWithOneRegion(t)

  t.test('an object that does not exist cannot be opened', async (t) => {
    const missing = uniqueKey('missing')
    for (const sent of [missing, missing.slice(1), `//${missing.slice(1)}`]) {
      await refused(t, app, 'r', { key: sent, byte_size: 64 }, 400, unableToOpen(sent))
    }
  })

  t.test('a directory in the shm directory is refused', async (t) => {
    const directory = makeDirectory(t)
    await refused(t, app, 'r', { key: directory, byte_size: 64 }, 400, unableToOpen(directory))
  })

  t.test('a FIFO in the shm directory is refused', async (t) => {
    const fifo = makeFifo(t)
    await refused(t, app, 'r', { key: fifo, byte_size: 64 }, 400, unableToOpen(fifo))
  })

  t.test('a symbolic link is refused, even to a regular file or to a real object', async (t) => {
    const file = path.join(tmpdir(), `${uniqueKey('target').slice(1)}.bin`)
    writeFileSync(file, Buffer.alloc(PAGE_SIZE))
    t.teardown(() => rmSync(file, { force: true }))
    const toFile = makeSymlink(t, file)
    await refused(t, app, 'r', { key: toFile, byte_size: 64 }, 400, unableToOpen(toFile))
    const object = makeObject(t, PAGE_SIZE)
    const toObject = makeSymlink(t, objectPath(object))
    await refused(t, app, 'r', { key: toObject, byte_size: 64 }, 400, unableToOpen(toObject))
  })
})

t.test('6. bounds', async (t) => {
  const { app } = await appWithOneRegion(t, { limits: { maxRegionBytes: MAX_SAFE, maxTotalBytes: MAX_SAFE } })
  const key = makeObject(t, PAGE_SIZE)

  t.test('a range beyond the object\'s size is refused', async (t) => {
    for (const [offset, byteSize] of [[0, PAGE_SIZE + 1], [PAGE_SIZE, 1], [PAGE_SIZE - 96, 97], [PAGE_SIZE + 1, 1],
      [1, PAGE_SIZE]]) {
      await refused(t, app, 'r', { key, offset, byte_size: byteSize }, 400, invalidArgs('r'))
    }
  })

  t.test('byte_size 0 is refused, wherever it starts', async (t) => {
    for (const offset of [0, 1, PAGE_SIZE]) await refused(t, app, 'r', { key, offset, byte_size: 0 }, 400, invalidArgs('r'))
  })

  t.test('the check is overflow-safe', async (t) => {
    // No other region: the total limit must not be what refuses these sizes.
    const app = await buildApp(t, { limits: { maxRegionBytes: MAX_SAFE, maxTotalBytes: MAX_SAFE } })
    for (const [offset, byteSize] of [[MAX_SAFE, MAX_SAFE], [MAX_SAFE, 1], [1, MAX_SAFE], [PAGE_SIZE, MAX_SAFE - PAGE_SIZE]]) {
      await refused(t, app, 'r', { key, offset, byte_size: byteSize }, 400, invalidArgs('r'))
    }
  })

  t.test('a range that ends exactly at the end of the object fits', async (t) => {
    assertEmptySuccess(t, await register(app, 'whole', key, PAGE_SIZE))
    assertEmptySuccess(t, await register(app, 'tail', key, 96, PAGE_SIZE - 96))
    assertEmptySuccess(t, await register(app, 'last-byte', key, 1, PAGE_SIZE - 1))
    t.same(app.systemSharedMemory.status().map((region) => region.name), ['existing', 'last-byte', 'tail', 'whole'])
  })
})

t.test('7. any offset works, page-aligned or not', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 3 * PAGE_SIZE)
  const byteSize = 100
  for (const offset of [1, 7, 8, PAGE_SIZE - 1, PAGE_SIZE, PAGE_SIZE + 1, 2 * PAGE_SIZE - 50, 3 * PAGE_SIZE - byteSize]) {
    const name = `at-${offset}`
    const written = Uint8Array.from({ length: byteSize }, (_, index) => (offset + index * 7) % 251)
    writeObjectFile(key, offset, written)
    assertEmptySuccess(t, await register(app, name, key, byteSize, offset))
    const lease = app.systemSharedMemory.acquire(name, 0, byteSize)
    try {
      t.same([...lease.buffer], [...written], `offset ${offset}: reads the bytes written at that offset of the file`)
      lease.buffer[byteSize - 1] = 0xfe
      t.equal(readObjectFile(key, offset + byteSize - 1, 1)[0], 0xfe, `offset ${offset}: writes land at that offset of the file`)
    } finally {
      lease.release()
    }
  }
})

t.test('a failed registration leaves no descriptor open; a region holds one until unregistered', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, PAGE_SIZE)
  const directory = makeDirectory(t)
  // Warm up whatever Node opens lazily.
  await register(app, 'warm-up', key, 16)
  const before = openFdCount()
  for (let round = 0; round < 5; round++) {
    await register(app, `ok-${round}`, key, 16)
    await register(app, `too-big-${round}`, key, PAGE_SIZE + 1)
    await register(app, `empty-${round}`, key, 0)
    await register(app, `directory-${round}`, directory, 16)
  }
  t.equal(app.systemSharedMemory.status().length, 6)
  // Each region keeps its object open, to notice when the client shrinks it (see test/truncation.test.ts).
  t.equal(openFdCount(), before + 5, 'one descriptor per new region, none from the failures')
  app.systemSharedMemory.unregisterAll()
  t.equal(openFdCount(), before - 1, 'unregistering closes them all')
})

t.test('8. limits', async (t) => {
  t.test('maxRegions', async (t) => {
    const app = await buildApp(t, { limits: { maxRegions: 2 } })
    const key = makeObject(t, PAGE_SIZE)
    assertEmptySuccess(t, await register(app, 'a', key, 16))
    assertEmptySuccess(t, await register(app, 'b', key, 16))
    await refused(t, app, 'c', { key, byte_size: 16 }, 400,
      "cannot register shared memory region 'c': the server allows at most 2 registered regions")
    t.equal(mappingsOf(key).length, 2, 'the refused region was never mapped')
    await app.inject({ method: 'POST', url: '/v2/systemsharedmemory/region/a/unregister' })
    assertEmptySuccess(t, await register(app, 'c', key, 16))
  })

  t.test('maxRegionBytes', async (t) => {
    const app = await buildApp(t, { limits: { maxRegionBytes: 100 } })
    const key = makeObject(t, PAGE_SIZE)
    assertEmptySuccess(t, await register(app, 'fits', key, 100))
    await refused(t, app, 'big', { key, byte_size: 101 }, 400,
      "cannot register shared memory region 'big': byte_size 101 exceeds the server's limit of 100 bytes per region")
    t.equal(mappingsOf(key).length, 1, 'the refused region was never mapped')
  })

  t.test('maxTotalBytes', async (t) => {
    const app = await buildApp(t, { limits: { maxTotalBytes: 100 } })
    const key = makeObject(t, PAGE_SIZE)
    assertEmptySuccess(t, await register(app, 'first', key, 60))
    await refused(t, app, 'more', { key, byte_size: 41 }, 400,
      "cannot register shared memory region 'more': mapping 41 more bytes would exceed the server's limit of 100 bytes in total")
    assertEmptySuccess(t, await register(app, 'rest', key, 40))
    await refused(t, app, 'one-more', { key, byte_size: 1 }, 400,
      "cannot register shared memory region 'one-more': mapping 1 more bytes would exceed the server's limit of 100 bytes in total")
    await app.inject({ method: 'POST', url: '/v2/systemsharedmemory/region/first/unregister' })
    assertEmptySuccess(t, await register(app, 'after', key, 60))
  })
})

t.test('the allowKey option', async (t) => {
  t.test('as a RegExp: keys it does not match get the invalid-key message', async (t) => {
    const app = await buildApp(t, { allowKey: /_allowed$/ })
    const allowed = makeObject(t, PAGE_SIZE, 'allowed')
    const other = makeObject(t, PAGE_SIZE, 'other')
    assertEmptySuccess(t, await register(app, 'yes', allowed, 16))
    await refused(t, app, 'no', { key: other, byte_size: 16 }, 400, invalidKey('no', other))
  })

  t.test('as a RegExp with the g flag: the same answer on every call', async (t) => {
    const allowKey = /_allowed/g
    const app = await buildApp(t, { allowKey })
    const allowed = makeObject(t, PAGE_SIZE, 'allowed')
    const other = makeObject(t, PAGE_SIZE, 'other')
    for (let round = 0; round < 4; round++) {
      assertEmptySuccess(t, await register(app, `yes-${round}`, allowed, 16))
      await refused(t, app, `no-${round}`, { key: other, byte_size: 16 }, 400, invalidKey(`no-${round}`, other))
    }
    t.equal(allowKey.lastIndex, 0, 'the host\'s RegExp is left untouched')
  })

  t.test('as a function: it sees the key as sent, after the built-in checks', async (t) => {
    const seen: string[] = []
    const app = await buildApp(t, { allowKey: (key) => { seen.push(key); return key.endsWith('_ok') } })
    const allowed = makeObject(t, PAGE_SIZE, 'ok')
    const other = makeObject(t, PAGE_SIZE, 'no')
    assertEmptySuccess(t, await register(app, 'yes', `//${allowed.slice(1)}`, 16))
    await refused(t, app, 'no', { key: other, byte_size: 16 }, 400, invalidKey('no', other))
    await refused(t, app, 'bad', { key: '/a/b_ok', byte_size: 16 }, 400, invalidKey('bad', '/a/b_ok'))
    await refused(t, app, 'py', { key: `${RESERVED}x_ok`, byte_size: 16 }, 400, reservedKey('py', `${RESERVED}x_ok`, RESERVED))
    t.same(seen, [`//${allowed.slice(1)}`, other], 'called only for keys that passed the built-in checks')
  })
})

t.test('the reservedKeyPrefixes option adds to the built-in prefix', async (t) => {
  const ownPrefix = `fts_${process.pid}_`
  const app = await buildApp(t, { reservedKeyPrefixes: ['other_component_', ownPrefix] })
  const key = makeObject(t, PAGE_SIZE)
  await refused(t, app, 'mine', { key, byte_size: 16 }, 400, reservedKey('mine', key, ownPrefix))
  await refused(t, app, 'mine', { key: `//${key.slice(1)}`, byte_size: 16 }, 400, reservedKey('mine', `//${key.slice(1)}`, ownPrefix))
  await refused(t, app, 'other', { key: '/other_component_1', byte_size: 16 }, 400,
    reservedKey('other', '/other_component_1', 'other_component_'))
  await refused(t, app, 'py', { key: `${RESERVED}1`, byte_size: 16 }, 400, reservedKey('py', `${RESERVED}1`, RESERVED))
  // A key that holds a reserved prefix elsewhere than at its start is not reserved.
  const elsewhere = `/x_${ownPrefix}${key.slice(1)}`
  createObject(elsewhere, PAGE_SIZE)
  unlinkOnTeardown(t, elsewhere)
  assertEmptySuccess(t, await register(app, 'elsewhere', elsewhere, 16))
})
