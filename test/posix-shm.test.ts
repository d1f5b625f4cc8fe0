/**
 * lib/posix-shm.ts over real POSIX shared memory objects: mapping at any offset, sharing bytes
 * with the object's file, detaching on unmap, typed errors, and no descriptor ever left open.
 */
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { Worker } from 'node:worker_threads'
import t, { type Test } from 'tap'
import { createObject, isIntact, mapFile, mapObject, MappedRange, unlinkObject, unmapObject } from '../lib/addon/posix-shm'
import {
  makeObject, mappingsOf, objectPath, openFdCount, PAGE_SIZE, readObjectFile, shmMappings, throwsShm, uniqueKey, unlinkOnTeardown, writeObjectFile
} from './helpers/shm'
import { collectGarbage, fdsOf } from './helpers/observe'
import { makeDirectory, makeFifo } from './helpers/special-objects'

const run = promisify(execFile)
const packageRoot = path.resolve(__dirname, '..')

/** Maps and unmaps the buffer when the test ends (unless the test unmapped it already). */
function mapForTest (t: Test, key: string, offset: number, byteSize: number): ArrayBuffer {
  const buffer = mapObject(key, offset, byteSize)
  t.teardown(() => { unmapObject(buffer) })
  return buffer
}

t.test('map at offset 0: exactly byteSize, and bytes are shared both ways with the object file', async (t) => {
  const key = makeObject(t, 2 * PAGE_SIZE, 'map0')
  const buffer = mapForTest(t, key, 0, 100)
  t.type(buffer, ArrayBuffer)
  t.equal(buffer.byteLength, 100, 'the ArrayBuffer is exactly the mapped range')
  t.equal(mappingsOf(key).length, 1, 'the mapping is listed in /proc/self/maps')

  writeObjectFile(key, 0, [1, 2, 3])
  writeObjectFile(key, 99, [0xab])
  writeObjectFile(key, 100, [0xcd]) // just past the range: must not be reachable
  const view = new Uint8Array(buffer)
  t.same([...view.subarray(0, 3)], [1, 2, 3], 'file writes at the start are seen in the view')
  t.equal(view[99], 0xab, 'the last byte of the range is the object byte 99')
  t.equal(view[100], undefined, 'nothing past byteSize is reachable')

  view[50] = 0x77
  view.set([9, 8, 7], 10)
  t.same(readObjectFile(key, 50, 1), [0x77], 'view writes reach the object file')
  t.same(readObjectFile(key, 10, 3), [9, 8, 7])
  t.same(readObjectFile(key, 100, 1), [0xcd], 'the byte after the range is untouched')
})

t.test('map at offsets that are not page multiples points at the right bytes', async (t) => {
  const objectSize = 3 * PAGE_SIZE + 123
  const key = makeObject(t, objectSize, 'unaligned')
  // Every byte of the object holds a pattern that identifies its position.
  const pattern = Buffer.alloc(objectSize)
  for (let position = 0; position < objectSize; position++) pattern[position] = (position * 7 + (position >> 8)) & 0xff
  writeFileSync(objectPath(key), pattern)

  const cases: Array<[offset: number, byteSize: number]> = [
    [1, 100], [7, 3], [PAGE_SIZE - 1, 2], [PAGE_SIZE, 10], [PAGE_SIZE + 1, PAGE_SIZE], [5000, 999],
    [2 * PAGE_SIZE + 17, PAGE_SIZE + 106], [objectSize - 1, 1], [0, objectSize], [3, objectSize - 3]
  ]
  for (const [offset, byteSize] of cases) {
    const label = `offset ${offset}, byteSize ${byteSize}`
    const buffer = mapObject(key, offset, byteSize)
    const view = new Uint8Array(buffer)
    t.equal(buffer.byteLength, byteSize, `${label}: exact length`)
    t.ok(Buffer.from(buffer).equals(pattern.subarray(offset, offset + byteSize)), `${label}: the view shows the object's bytes`)

    view[0] = view[0] ^ 0xff
    view[byteSize - 1] = 0x5a
    const file = readFileSync(objectPath(key))
    t.equal(file[offset], view[0], `${label}: the first view byte is object byte ${offset}`)
    t.equal(file[offset + byteSize - 1], 0x5a, `${label}: the last view byte is object byte ${offset + byteSize - 1}`)
    if (offset > 0) t.equal(file[offset - 1], pattern[offset - 1], `${label}: the byte before the range is untouched`)

    writeObjectFile(key, offset + (byteSize >> 1), [0xee])
    t.equal(view[byteSize >> 1], 0xee, `${label}: a file write inside the range is seen at the same place`)
    t.ok(unmapObject(buffer), `${label}: unmapped`)
    writeFileSync(objectPath(key), pattern) // restore for the next case
  }
  t.same(mappingsOf(key), [], 'nothing stays mapped')
})

t.test('two mappings of one object see each other\'s writes', async (t) => {
  const key = makeObject(t, 2 * PAGE_SIZE, 'twice')
  const whole = new Uint8Array(mapForTest(t, key, 0, 2 * PAGE_SIZE))
  const part = new Uint8Array(mapForTest(t, key, PAGE_SIZE + 5, 64))
  t.equal(mappingsOf(key).length, 2, 'two separate mappings')
  part[0] = 42
  t.equal(whole[PAGE_SIZE + 5], 42)
  whole[PAGE_SIZE + 5 + 63] = 24
  t.equal(part[63], 24)
})

t.test('unmap detaches the buffer: every view reads as empty, and the mapping is gone', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'detach')
  writeObjectFile(key, 0, [1, 2, 3, 4, 5, 6, 7, 8])
  const buffer = mapObject(key, 0, 64)
  const bytes = new Uint8Array(buffer)
  const middle = new Uint8Array(buffer, 8, 16)
  const nodeBuffer = Buffer.from(buffer)
  const floats = new Float32Array(buffer)
  const dataView = new DataView(buffer)
  const sliceOfBuffer = nodeBuffer.subarray(2, 6)
  t.equal(bytes[0], 1)
  t.equal(dataView.getUint8(7), 8)
  t.equal(mappingsOf(key).length, 1)

  t.equal(unmapObject(buffer), true, 'the first unmap unmaps')
  t.equal(buffer.byteLength, 0, 'the ArrayBuffer is detached')
  for (const [name, view] of Object.entries({ bytes, middle, nodeBuffer, floats, sliceOfBuffer })) {
    t.equal(view.length, 0, `${name} reads length 0`)
    t.equal(view.byteLength, 0, `${name} has byteLength 0`)
    t.equal(view[0], undefined, `${name} reads nothing`)
  }
  t.throws(() => dataView.getUint8(0), TypeError, 'a DataView refuses to read a detached buffer')
  t.throws(() => dataView.byteLength, TypeError)
  t.same(mappingsOf(key), [], 'the mapping left /proc/self/maps')
  t.equal(unmapObject(buffer), false, 'a second unmap reports it was unmapped already')
  t.same(readObjectFile(key, 0, 8), [1, 2, 3, 4, 5, 6, 7, 8], 'the object itself is untouched')
})

t.test('a mapping outlives the unlink of its object', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'unlinked')
  const view = new Uint8Array(mapForTest(t, key, 10, 20))
  writeObjectFile(key, 10, [33])
  unlinkObject(key)
  t.notOk(existsSync(objectPath(key)), 'the name is gone')
  t.equal(view[0], 33, 'the mapping still reads the object')
  view[1] = 44
  t.equal(view[1], 44)
  t.match(mappingsOf(key)[0], /\(deleted\)$/, 'the kernel lists it as a deleted object')
})

t.test('createObject makes a zero-filled, mode 0600 regular object of the asked size', async (t) => {
  for (const byteSize of [0, 1, 100, PAGE_SIZE, 3 * PAGE_SIZE + 1]) {
    const key = uniqueKey('create')
    unlinkOnTeardown(t, key)
    createObject(key, byteSize)
    const info = statSync(objectPath(key))
    t.ok(info.isFile(), `${byteSize}: a regular file in the shm directory`)
    t.equal(info.size, byteSize, `${byteSize}: of the asked size`)
    t.equal(info.mode & 0o777, 0o600, `${byteSize}: readable and writable by its owner only`)
    t.equal(info.uid, process.getuid?.(), `${byteSize}: owned by this user`)
    t.ok(readFileSync(objectPath(key)).every((byte) => byte === 0), `${byteSize}: zero-filled`)
    if (byteSize > 0) {
      const view = new Uint8Array(mapObject(key, 0, byteSize))
      t.equal(view.length, byteSize, `${byteSize}: can be mapped whole`)
      t.ok(unmapObject(view.buffer as ArrayBuffer))
    }
    unlinkObject(key)
    t.notOk(existsSync(objectPath(key)), `${byteSize}: unlink removes it`)
  }
})

t.test('keys are accepted with or without leading slashes', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'slashes')
  const bare = key.replace(/^\/+/, '')
  writeObjectFile(key, 0, [7])
  for (const form of [bare, `/${bare}`, `///${bare}`]) {
    const buffer = mapObject(form, 0, 1)
    t.equal(new Uint8Array(buffer)[0], 7, `${form.slice(0, 4)}...: the same object`)
    unmapObject(buffer)
  }
  const created = uniqueKey('bare').replace(/^\/+/, '')
  createObject(created, 8)
  t.ok(existsSync(objectPath(created)))
  unlinkObject(`//${created}`)
  t.notOk(existsSync(objectPath(created)))
})

t.test('system call failures carry the errno name', async (t) => {
  const fdsBefore = openFdCount()
  const missing = uniqueKey('missing')
  throwsShm(t, () => mapObject(missing, 0, 1), 'ENOENT', 'shm_open', 'map of a missing key')
  throwsShm(t, () => unlinkObject(missing), 'ENOENT', 'shm_unlink', 'unlink of a missing key')

  const existing = makeObject(t, 100, 'exists')
  writeObjectFile(existing, 0, [5])
  throwsShm(t, () => createObject(existing, 4096), 'EEXIST', 'shm_open', 'create of an existing key')
  t.equal(statSync(objectPath(existing)).size, 100, 'the existing object keeps its size')
  t.same(readObjectFile(existing, 0, 1), [5], 'and its bytes')

  throwsShm(t, () => mapObject(`${existing}/inside`, 0, 1), 'EINVAL', 'shm_open', 'a key with a slash inside')

  const directory = makeDirectory(t)
  throwsShm(t, () => mapObject(directory, 0, 1), 'EINVAL', 'shm_open', 'a directory cannot be opened read-write')
  throwsShm(t, () => unlinkObject(directory), 'EISDIR', 'shm_unlink', 'unlink of a directory')
  t.ok(existsSync(objectPath(directory)), 'the directory is still there')

  const link = uniqueKey('link')
  symlinkSync(objectPath(existing), objectPath(link))
  t.teardown(() => unlinkSync(objectPath(link)))
  throwsShm(t, () => mapObject(link, 0, 1), 'ELOOP', 'shm_open', 'a symbolic link is never followed')

  t.equal(openFdCount(), fdsBefore, 'no descriptor left open')
  t.same(shmMappings().filter((line) => line.includes(existing.slice(1))), [], 'nothing mapped')
})

t.test('a key that is not a regular object is refused: ERR_SHM_NOT_REGULAR', async (t) => {
  const fdsBefore = openFdCount()
  const fifo = makeFifo(t)
  throwsShm(t, () => mapObject(fifo, 0, 1), 'ERR_SHM_NOT_REGULAR')
  throwsShm(t, () => mapObject(fifo, 0, 0), 'ERR_SHM_NOT_REGULAR', undefined, 'checked before the bounds')
  t.equal(openFdCount(), fdsBefore, 'the descriptor opened on the fifo is closed')
  t.same(mappingsOf(fifo), [])
})

t.test('ranges outside the object are refused: ERR_SHM_OUT_OF_BOUNDS', async (t) => {
  const fdsBefore = openFdCount()
  const key = makeObject(t, PAGE_SIZE + 10, 'bounds')
  const size = PAGE_SIZE + 10
  const outside: Array<[offset: number, byteSize: number, why: string]> = [
    [0, 0, 'byte size 0'],
    [100, 0, 'byte size 0 inside the object'],
    [0, size + 1, 'one byte more than the object'],
    [size - 10, 11, 'offset + size one byte beyond'],
    [size, 1, 'offset at the end'],
    [size + 1, 1, 'offset beyond the size'],
    [5 * PAGE_SIZE, PAGE_SIZE, 'offset far beyond the size'],
    [Number.MAX_SAFE_INTEGER, 1, 'the largest safe offset'],
    [1, Number.MAX_SAFE_INTEGER, 'the largest safe byte size']
  ]
  for (const [offset, byteSize, why] of outside) {
    throwsShm(t, () => mapObject(key, offset, byteSize), 'ERR_SHM_OUT_OF_BOUNDS', undefined, why)
  }
  const empty = makeObject(t, 0, 'empty')
  throwsShm(t, () => mapObject(empty, 0, 1), 'ERR_SHM_OUT_OF_BOUNDS', undefined, 'an empty object')

  const exact = mapObject(key, size - 10, 10)
  t.equal(exact.byteLength, 10, 'a range that ends at the end of the object fits')
  unmapObject(exact)
  t.equal(openFdCount(), fdsBefore, 'no descriptor left open')
  t.same(mappingsOf(key), [], 'nothing left mapped')
})

t.test('invalid arguments are refused before any system call: ERR_INVALID_ARG', async (t) => {
  const fdsBefore = openFdCount()
  const key = makeObject(t, PAGE_SIZE, 'args')
  // Never created: a create that wrongly succeeded would still be cleaned up.
  const never = uniqueKey('never')
  unlinkOnTeardown(t, never)
  const invalid = (operation: () => unknown, label: string) =>
    throwsShm(t, operation, 'ERR_INVALID_ARG', undefined, label)

  // The object `key` exists: a key cut short at the NUL byte would open it.
  invalid(() => mapObject(`${key}\0tail`, 0, 1), 'a key with a NUL byte')
  invalid(() => createObject(`${key}\0tail`, 1), 'create with a NUL byte')
  invalid(() => unlinkObject(`${key}\0tail`), 'unlink with a NUL byte')
  t.ok(existsSync(objectPath(key)), 'the object named by the start of the key was not unlinked')

  for (const offset of [-1, -0.5, 1.5, Number.NaN, Infinity, -Infinity, 2 ** 53, Number.MAX_SAFE_INTEGER + 2, 1e300]) {
    invalid(() => mapObject(key, offset, 1), `offset ${offset}`)
    invalid(() => mapObject(key, 0, offset), `byteSize ${offset}`)
    invalid(() => createObject(never, offset), `create of byteSize ${offset}`)
  }
  for (const value of ['0', 1n, null, undefined, {}]) {
    invalid(() => mapObject(key, value as unknown as number, 1), `offset ${String(value)}`)
    invalid(() => mapObject(key, 0, value as unknown as number), `byteSize ${String(value)}`)
  }
  for (const notAKey of [42, null, undefined, Symbol('key'), { toString: () => key }]) {
    invalid(() => mapObject(notAKey as unknown as string, 0, 1), `key ${String(notAKey)}`)
    invalid(() => unlinkObject(notAKey as unknown as string), `unlink of key ${String(notAKey)}`)
  }
  const loose = { mapObject, createObject, unlinkObject, unmapObject } as unknown as Record<string, (...args: unknown[]) => unknown>
  invalid(() => loose.mapObject(key, 0), 'map without byteSize')
  invalid(() => loose.createObject(never), 'create without byteSize')
  invalid(() => loose.unlinkObject(), 'unlink without key')
  invalid(() => loose.unmapObject(), 'unmap without buffer')

  invalid(() => unmapObject(new ArrayBuffer(8)), 'unmap of a plain ArrayBuffer')
  invalid(() => unmapObject(new ArrayBuffer(0)), 'unmap of an empty ArrayBuffer')
  invalid(() => unmapObject(Buffer.alloc(8) as unknown as ArrayBuffer), 'unmap of a Buffer')
  invalid(() => unmapObject(new SharedArrayBuffer(8) as unknown as ArrayBuffer), 'unmap of a SharedArrayBuffer')
  invalid(() => unmapObject({ byteLength: 8 } as unknown as ArrayBuffer), 'unmap of an object')
  // The addon names its mappings by numbers: none given here may reach one.
  const live = new MappedRange(key, 0, PAGE_SIZE)
  t.teardown(() => { live.unmap() })
  for (const number of [0, 1, 2 ** 24, 2 ** 24 + 1, 2 ** 25, 2 ** 52]) {
    invalid(() => unmapObject(number as unknown as ArrayBuffer), `unmap of the number ${number}`)
    invalid(() => isIntact(number as unknown as ArrayBuffer), `isIntact of the number ${number}`)
  }
  t.ok(live.intact, 'a live range is untouched by numbers that look like handles')
  t.equal(mappingsOf(key).length, 1, 'and still mapped')

  t.notOk(existsSync(objectPath(never)), 'nothing was created')
  t.equal(openFdCount(), fdsBefore + 1, 'no descriptor left open but the live range\'s')
})

t.test('keys longer than 255 bytes are refused, never cut short', async (t) => {
  // A 255-byte key (no leading slash, the kernel's limit for a name) is the longest accepted.
  const longest = `fts_${process.pid}_long_`.padEnd(255, 'k')
  unlinkOnTeardown(t, longest)
  createObject(longest, 16)
  writeObjectFile(longest, 0, [99])
  const buffer = mapObject(longest, 0, 16)
  t.equal(new Uint8Array(buffer)[0], 99, 'a 255-byte key works')
  unmapObject(buffer)

  const invalid = (operation: () => unknown, label: string) =>
    throwsShm(t, operation, 'ERR_INVALID_ARG', undefined, label)
  // Each of these starts with `longest`: cutting it to 255 bytes (or at a character boundary
  // before that) would name the existing object.
  for (const [tooLong, why] of [
    [`${longest}k`, '256 ASCII bytes'],
    [`${longest}${'k'.repeat(300)}`, '555 ASCII bytes'],
    [`${longest}é`, 'a 2-byte character after 255 bytes'],
    [`${longest}€`, 'a 3-byte character after 255 bytes'],
    [`${longest}😀`, 'a 4-byte character after 255 bytes'],
    [`/${longest}`, '255 bytes after a leading slash']
  ]) {
    invalid(() => mapObject(tooLong, 0, 1), `map: ${why}`)
    invalid(() => createObject(tooLong, 1), `create: ${why}`)
    invalid(() => unlinkObject(tooLong), `unlink: ${why}`)
  }
  t.ok(existsSync(objectPath(longest)), 'the 255-byte object was neither unlinked nor re-created')
  t.equal(statSync(objectPath(longest)).size, 16)

  // 255 bytes made of multi-byte characters are fine too.
  const wide = `fts_${process.pid}_`.padEnd(15, 'w') + '€'.repeat(80) // 15 + 240 bytes
  t.equal(Buffer.byteLength(wide), 255)
  unlinkOnTeardown(t, wide)
  createObject(wide, 8)
  const wideBuffer = mapObject(wide, 0, 8)
  t.equal(wideBuffer.byteLength, 8, 'a 255-byte key of 3-byte characters works')
  unmapObject(wideBuffer)
  invalid(() => mapObject(`${wide}€`, 0, 8), '258 bytes of 3-byte characters')
})

t.test('no descriptor and no mapping is left after many successes and failures', async (t) => {
  const key = makeObject(t, 2 * PAGE_SIZE, 'churn')
  const fifo = makeFifo(t)
  const missing = uniqueKey('missing')
  const fdsBefore = openFdCount()
  for (let round = 0; round < 200; round++) {
    const buffer = mapObject(key, round * 13, PAGE_SIZE)
    new Uint8Array(buffer)[0] = round & 0xff
    unmapObject(buffer)
    t.throws(() => mapObject(missing, 0, 1))
    t.throws(() => mapObject(fifo, 0, 1))
    t.throws(() => mapObject(key, round + 1, 2 * PAGE_SIZE))
    t.throws(() => createObject(key, 1))
  }
  t.equal(openFdCount(), fdsBefore, 'as many descriptors as before')
  t.same(mappingsOf(key), [], 'no mapping left')
})

t.test('a buffer that is garbage-collected without unmap is unmapped by its finalizer', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'finalize')
  const survivorKey = makeObject(t, PAGE_SIZE, 'survivor')

  // A buffer unmapped by hand must not be unmapped again by its finalizer: the address may have
  // been reused by a later mapping (the survivor, mapped right after, with the same length).
  let unmappedByHand: ArrayBuffer | undefined = mapObject(key, 0, PAGE_SIZE)
  unmapObject(unmappedByHand)
  unmappedByHand = undefined
  const survivor = mapObject(survivorKey, 0, PAGE_SIZE)
  t.teardown(() => { unmapObject(survivor) })
  new Uint8Array(survivor)[0] = 0x11

  ;(() => { mapObject(key, 0, PAGE_SIZE) })() // dropped at once
  t.equal(mappingsOf(key).length, 1, 'mapped while the buffer lives')
  // Finalizers run after a collection, from the event loop: a few turns of it, however long they take.
  for (let attempt = 0; attempt < 50 && mappingsOf(key).length > 0; attempt++) {
    collectGarbage()
    await new Promise((resolve) => setImmediate(resolve))
  }
  t.same(mappingsOf(key), [], 'the finalizer unmapped the collected buffer')
  t.equal(mappingsOf(survivorKey).length, 1, 'the survivor is still mapped')
  t.equal(new Uint8Array(survivor)[0], 0x11, 'and still readable')
  t.equal(readObjectFile(survivorKey, 0, 1)[0], 0x11)
})

t.test('the addon is found from the sources and from the compiled layout', async (t) => {
  const scratch = mkdtempSync(path.join(tmpdir(), 'fts-layout-'))
  t.teardown(() => rmSync(scratch, { recursive: true, force: true }))
  const probe = (module: string) => {
    const key = uniqueKey('layout')
    unlinkOnTeardown(t, key)
    return `
    const shm = require(${JSON.stringify(module)})
    const key = ${JSON.stringify(key)}
    shm.createObject(key, 8)
    const buffer = shm.mapObject(key, 0, 8)
    new Uint8Array(buffer)[0] = 3
    const unmapped = shm.unmapObject(buffer)
    shm.unlinkObject(key)
    process.stdout.write(JSON.stringify({ length: buffer.byteLength, unmapped }))`
  }

  // These children load the module from other paths and transforms: their coverage would be merged
  // into lib/posix-shm.ts under different line maps, so they report none.
  const withoutCoverage = { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' }

  // A source checkout that sits inside a directory named dist.
  mkdirSync(path.join(scratch, 'dist'))
  symlinkSync(packageRoot, path.join(scratch, 'dist', 'checkout'))
  const fromSources = await run(process.execPath, [
    '--preserve-symlinks', '--require', require.resolve('tsx/cjs'),
    '-e', probe(path.join(scratch, 'dist', 'checkout', 'lib', 'addon', 'posix-shm.ts'))
  ], { cwd: scratch, env: withoutCoverage })
  t.same(JSON.parse(fromSources.stdout), { length: 0, unmapped: true }, 'sources under a dist directory')

  // The published layout: <root>/dist/lib/addon/posix-shm.js beside <root>/build.
  const ts = await import('typescript')
  const root = path.join(scratch, 'package')
  mkdirSync(path.join(root, 'dist', 'lib', 'addon'), { recursive: true })
  // posix-shm.js and the module that finds the addon for it.
  for (const module of ['posix-shm', 'addon-errors', 'native-addon']) {
    const compiled = ts.transpileModule(readFileSync(path.join(packageRoot, 'lib', 'addon', `${module}.ts`), 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true }
    }).outputText
    writeFileSync(path.join(root, 'dist', 'lib', 'addon', `${module}.js`), compiled)
  }
  symlinkSync(path.join(packageRoot, 'build'), path.join(root, 'build'))
  symlinkSync(path.join(packageRoot, 'node_modules'), path.join(root, 'node_modules'))
  const fromDist = await run(process.execPath, ['-e', probe(path.join(root, 'dist', 'lib', 'addon', 'posix-shm.js'))], { cwd: scratch, env: withoutCoverage })
  t.same(JSON.parse(fromDist.stdout), { length: 0, unmapped: true }, 'compiled dist/lib')
})

t.test('a MappedRange is seen through windows over one mapping, all detached by unmap', async (t) => {
  const key = makeObject(t, 3 * PAGE_SIZE, 'windows')
  const range = new MappedRange(key, 100, 2 * PAGE_SIZE)
  t.teardown(() => { range.unmap() })
  const head = new Uint8Array(range.window(0, 10))
  const tail = new Uint8Array(range.window(2 * PAGE_SIZE - 4, 4))
  const twin = new Uint8Array(range.window(0, 10))
  t.equal(mappingsOf(key).length, 1, 'windows do not map again')
  writeObjectFile(key, 100, [7])
  writeObjectFile(key, 100 + 2 * PAGE_SIZE - 1, [9])
  t.same([head[0], twin[0], tail[3]], [7, 7, 9], 'each window sees its part of the object')
  throwsShm(t, () => range.window(2 * PAGE_SIZE - 3, 4), 'ERR_SHM_OUT_OF_BOUNDS', undefined, 'a window past the end')
  throwsShm(t, () => range.window(2 * PAGE_SIZE + 1, 0), 'ERR_SHM_OUT_OF_BOUNDS', undefined, 'a window starting past the end')
  throwsShm(t, () => range.window(0, MappedRange.maxWindowBytes + 1), 'ERR_SHM_WINDOW_TOO_LARGE', undefined,
    'a window larger than one ArrayBuffer')
  t.equal(range.window(2 * PAGE_SIZE, 0).byteLength, 0, 'an empty window at the end is fine')
  t.ok(range.intact)
  t.equal(range.unmap(), true)
  t.same([head.length, tail.length, twin.length], [0, 0, 0], 'every window reads as empty')
  t.same(mappingsOf(key), [], 'unmapped')
  t.notOk(range.intact, 'not intact once unmapped')
  t.equal(range.unmap(), false, 'a second unmap does nothing')
  throwsShm(t, () => range.window(0, 1), 'ERR_SHM_UNMAPPED', undefined, 'no window once unmapped')
})

t.test('two ranges of one object name the same object, whatever the key; other objects differ', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'identity')
  const other = makeObject(t, PAGE_SIZE, 'other')
  const ranges = [new MappedRange(key, 0, 10), new MappedRange(`//${key.replace(/^\/+/, '')}`, 20, 10), new MappedRange(other, 0, 10)]
  t.teardown(() => ranges.forEach((range) => range.unmap()))
  t.match(ranges[0].object, /^\d+:\d+$/, 'device:inode')
  t.equal(ranges[1].object, ranges[0].object, 'one object under two spellings of its key')
  t.not(ranges[2].object, ranges[0].object, 'another object')
})

t.test('an unmapped range names nothing, even once another mapping takes its place in the addon', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'stale')
  const otherKey = makeObject(t, PAGE_SIZE, 'stale_other')
  const first = new MappedRange(key, 0, PAGE_SIZE)
  const window = new Uint8Array(first.window(0, 8))
  t.equal(first.unmap(), true)
  // The addon hands out the freed place again: the old range must not reach the new mapping.
  const second = new MappedRange(otherKey, 0, PAGE_SIZE)
  t.teardown(() => { second.unmap() })
  t.equal(first.unmap(), false, 'the old range unmaps nothing')
  t.notOk(first.intact, 'and is not intact')
  throwsShm(t, () => first.window(0, 1), 'ERR_SHM_UNMAPPED', undefined, 'no window of the old range')
  t.equal(window.length, 0, 'its window stays detached')
  t.equal(mappingsOf(otherKey).length, 1, 'the new mapping is untouched')
  t.ok(second.intact)
  writeObjectFile(otherKey, 0, [5])
  t.equal(new Uint8Array(second.window(0, 1))[0], 5, 'and reads its object')
})

t.test('a range dropped without unmap stays mapped until its thread ends, which unmaps it', async (t) => {
  const key = makeObject(t, PAGE_SIZE, 'dropped')
  const gypBuild = require.resolve('node-gyp-build')
  // A worker maps through the addon, keeps one window, drops both handles, and waits to be told to end.
  const worker = new Worker(`
    const { parentPort, workerData: { key, size, root, gypBuild } } = require('node:worker_threads')
    const addon = require(gypBuild)(root)
    addon.map(key, 0, size)
    addon.window(addon.map(key, 0, size), 0, size)
    parentPort.postMessage('mapped')
    parentPort.once('message', () => process.exit(0))
  `, { eval: true, workerData: { key, size: PAGE_SIZE, root: packageRoot, gypBuild } })
  t.teardown(() => worker.terminate())
  await once(worker, 'message')
  for (let attempt = 0; attempt < 5; attempt++) {
    collectGarbage()
    await new Promise((resolve) => setImmediate(resolve))
  }
  t.equal(mappingsOf(key).length, 2, 'both mappings stay while the thread lives, collected or not')
  t.equal(fdsOf(key), 2, 'each with its descriptor')
  worker.postMessage('end')
  await once(worker, 'exit')
  t.same(mappingsOf(key), [], 'the thread\'s end unmapped them')
  t.equal(fdsOf(key), 0, 'and closed their descriptors')
})

t.test('mapObject refuses a range larger than one ArrayBuffer, and leaves nothing mapped', async (t) => {
  const byteSize = MappedRange.maxWindowBytes + 1
  if (byteSize > 16 * 1024 ** 3) {
    t.comment(`this Node's ArrayBuffers hold ${MappedRange.maxWindowBytes} bytes: no object here is larger`)
    t.pass('nothing to refuse on this Node')
    return
  }
  const key = makeObject(t, byteSize, 'one_buffer') // sparse: costs no memory
  throwsShm(t, () => mapObject(key, 0, byteSize), 'ERR_SHM_WINDOW_TOO_LARGE')
  t.same(mappingsOf(key), [], 'the mapping made first was unmapped')
})

t.test('isIntact follows the object: true while it holds the range, false once shrunk or unmapped', async (t) => {
  const key = makeObject(t, 2 * PAGE_SIZE, 'intact')
  const buffer = mapForTest(t, key, PAGE_SIZE, PAGE_SIZE)
  t.equal(isIntact(buffer), true)
  truncateSync(objectPath(key), PAGE_SIZE)
  t.equal(isIntact(buffer), false, 'shrunk below the range')
  unmapObject(buffer)
  t.equal(isIntact(buffer), false, 'unmapped')
})

t.test('MappedRange.reaches reads one byte: false once a page past the object\'s end is reached, and for every byte after', async (t) => {
  const key = makeObject(t, 4 * PAGE_SIZE, 'reaches')
  const range = new MappedRange(key, 100, 3 * PAGE_SIZE)
  t.teardown(() => { range.unmap() })
  writeObjectFile(key, 100, [7])
  t.same([range.reaches(0), range.reaches(3 * PAGE_SIZE - 1)], [true, true], 'both ends of a whole range')
  throwsShm(t, () => range.reaches(3 * PAGE_SIZE), 'ERR_SHM_OUT_OF_BOUNDS', undefined, 'a byte past the range')
  throwsShm(t, () => range.reaches(-1), 'ERR_INVALID_ARG', undefined, 'not an offset')
  truncateSync(objectPath(key), 2 * PAGE_SIZE)
  t.equal(range.reaches(PAGE_SIZE), true, 'a byte inside what is left')
  t.equal(range.untouchedPastEnd, true, 'nothing past the end touched yet')
  t.equal(range.reaches(3 * PAGE_SIZE - 1), false, 'a byte past the end: its page faulted, and the fault guard caught it')
  t.same([range.untouchedPastEnd, range.reaches(0)], [false, false], 'the range is poisoned from then on')
  t.equal(new Uint8Array(range.window(0, 1))[0], 7, 'its pages inside the object are still the object\'s')
  range.unmap()
  t.equal(range.reaches(0), false, 'false once unmapped')
})

t.test('mapFile maps a regular file as map does an object: shared, bounded, never through a link', async (t) => {
  const directory = mkdtempSync(path.join(tmpdir(), 'fts-map-file-'))
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  const file = path.join(directory, 'table')
  writeFileSync(file, Buffer.alloc(2 * PAGE_SIZE))
  const fds = openFdCount()
  const [one, two] = [mapFile(file, 2 * PAGE_SIZE), mapFile(file, PAGE_SIZE)]
  new Uint8Array(one).set([7, 8, 9], PAGE_SIZE - 1)
  t.same([...new Uint8Array(two).subarray(PAGE_SIZE - 1)], [7], 'two mappings share the bytes')
  t.same([...readFileSync(file).subarray(PAGE_SIZE - 1, PAGE_SIZE + 2)], [7, 8, 9], 'and so does the file')
  t.ok(isIntact(one))
  truncateSync(file, PAGE_SIZE)
  t.notOk(isIntact(one), 'a file shrunk under the mapping is seen')
  t.ok(isIntact(two), 'a mapping it still holds is intact')
  t.ok(unmapObject(one) && unmapObject(two), 'unmapped')

  symlinkSync(file, path.join(directory, 'link'))
  mkdirSync(path.join(directory, 'directory'))
  throwsShm(t, () => mapFile(path.join(directory, 'link'), 8), 'ELOOP', 'open', 'a symbolic link')
  throwsShm(t, () => mapFile(path.join(directory, 'missing'), 8), 'ENOENT', 'open', 'a missing file is never created')
  throwsShm(t, () => mapFile(path.join(directory, 'directory'), 8), 'EISDIR', 'open', 'a directory')
  throwsShm(t, () => mapFile(file, PAGE_SIZE + 1), 'ERR_SHM_OUT_OF_BOUNDS', undefined, 'more than the file holds')
  throwsShm(t, () => mapFile(file, 0), 'ERR_SHM_OUT_OF_BOUNDS', undefined, 'zero bytes')
  throwsShm(t, () => mapFile(`${file}\0x`, 8), 'ERR_INVALID_ARG', undefined, 'a NUL byte')
  throwsShm(t, () => mapFile(`/${'a'.repeat(4095)}`, 8), 'ERR_INVALID_ARG', undefined, 'longer than PATH_MAX')
  throwsShm(t, () => mapFile(file, -1), 'ERR_INVALID_ARG', undefined, 'a negative size')
  t.equal(openFdCount(), fds, 'no descriptor left, whatever failed')
})
