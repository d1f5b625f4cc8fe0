/**
 * DESIGN.md's interop proof: a Node client that made its region with shm-typed-array (which puts
 * an 8-byte length header at the start of the object) registers it at offset 8 and is served.
 */
import { spawn, spawnSync } from 'node:child_process'
import { closeSync, openSync, readSync, statSync } from 'node:fs'
import path from 'node:path'
import { createInterface } from 'node:readline'
import t, { type Test } from 'tap'
import { buildApp, registerBody, SYSTEM } from './helpers/app'
import { mappingsOf, objectPath, uniqueKey, unlinkOnTeardown } from './helpers/shm'

const CLIENT = path.join(__dirname, 'fixtures', 'shm-typed-array-client.js')
const HEADER_BYTES = 8
const COUNT = 1000
const expected = (index: number) => index * 0.25 + 1

interface Client {
  pid: number
  length: number
  dump (): Promise<number[]>
  set (index: number, value: number): Promise<void>
  exit (): Promise<number | null>
}

/** The client process; its object is unlinked when the test ends, even if the test fails. */
async function startClient (t: Test, key: string, count: number): Promise<Client> {
  unlinkOnTeardown(t, key) // registered before the object exists: nothing can escape cleanup
  const child = spawn(process.execPath, [CLIENT, key, String(count)], { cwd: path.join(__dirname, '..') })
  t.teardown(() => { if (child.exitCode === null) child.kill() })
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async (): Promise<Record<string, unknown>> => {
    const { value, done } = await lines.next()
    if (done === true) throw new Error('the client process ended')
    return JSON.parse(value)
  }
  const send = async (command: object) => {
    child.stdin.write(`${JSON.stringify(command)}\n`)
    return next()
  }
  const hello = await next()
  if (hello.ready !== true) throw new Error(`the client failed: ${JSON.stringify(hello)}`)
  return {
    pid: hello.pid as number,
    length: hello.length as number,
    dump: async () => (await send({ op: 'dump' })).values as number[],
    set: async (index, value) => { await send({ op: 'set', index, value }) },
    exit: async () => {
      child.stdin.write(`${JSON.stringify({ op: 'exit' })}\n`)
      return exited
    }
  }
}

function readHeader (key: string): bigint {
  const header = Buffer.alloc(HEADER_BYTES)
  const fd = openSync(objectPath(key), 'r')
  try {
    readSync(fd, header, 0, HEADER_BYTES, 0)
  } finally {
    closeSync(fd)
  }
  return header.readBigUInt64LE(0)
}

const floatsOf = (buffer: Uint8Array) => new Float32Array(buffer.buffer, buffer.byteOffset, buffer.byteLength / 4)

/** Loads shm-typed-array; prints why it could not. */
const LOAD = "try { require('shm-typed-array') } catch (error) { process.stdout.write(error.message.replace(/\\s+/g, ' ')); process.exit(1) }"

/**
 * Why this Node cannot load shm-typed-array, if it cannot. It is a NAN addon, built for one Node
 * ABI by `npm rebuild shm-typed-array`, and its last release (0.1.1) does not compile against
 * Node 26's V8: an optional dependency of the test/interop workspace, so `npm ci` goes on without
 * it there. Tried in a child: loading it registers an exit handler in the process.
 */
function shmTypedArrayUnloadable (): string | false {
  const load = spawnSync(process.execPath, ['-e', LOAD], { cwd: path.join(__dirname, '..'), encoding: 'utf8' })
  if (load.status === 0) return false
  return `shm-typed-array cannot be loaded on Node ${process.version} (${load.stdout || `exit code ${load.status}`}); ` +
    'it is an optional development dependency that `npm ci` leaves out where it does not compile (Node 26 and newer); ' +
    'elsewhere `npm rebuild shm-typed-array` builds it for this Node'
}
const skip = shmTypedArrayUnloadable()

t.test('a region made with shm-typed-array is registered at offset 8 and served', { skip }, async (t) => {
  const key = uniqueKey('sta')
  const client = await startClient(t, key, COUNT)
  t.not(client.pid, process.pid, 'the client is another process')
  t.equal(client.length, COUNT)
  const dataBytes = COUNT * 4
  t.equal(statSync(objectPath(key)).size, HEADER_BYTES + dataBytes, 'shm-typed-array adds its header to the object')
  t.equal(readHeader(key), BigInt(dataBytes), 'the header holds the data length')

  const app = await buildApp(t)
  const register = await app.inject({
    method: 'POST', url: `${SYSTEM}/region/sta_input/register`, payload: registerBody(key, dataBytes, HEADER_BYTES)
  })
  t.equal(register.statusCode, 200, register.body)
  const status = await app.inject({ method: 'GET', url: `${SYSTEM}/region/sta_input/status` })
  t.same(status.json(), [{ name: 'sta_input', key, offset: HEADER_BYTES, byte_size: dataBytes }])

  const lease = app.systemSharedMemory.acquire('sta_input', 0, dataBytes)
  const values = floatsOf(lease.buffer)
  t.equal(values.length, COUNT)
  t.same([...values], Array.from({ length: COUNT }, (_, index) => expected(index)),
    'every element the client wrote, read at the right place')

  const part = app.systemSharedMemory.acquire('sta_input', 4 * 10, 4 * 5)
  t.same([...floatsOf(part.buffer)], [10, 11, 12, 13, 14].map(expected), 'an offset inside the region counts from the data')
  part.release()

  // Both ways while the client still has its own mapping.
  values.set([-1.5, 2.25], 0)
  values[COUNT - 1] = 1024
  const dumped = await client.dump()
  t.same(dumped.slice(0, 3), [-1.5, 2.25, expected(2)], 'the client sees this process\'s writes')
  t.equal(dumped[COUNT - 1], 1024, 'up to its last element')
  await client.set(500, -8)
  t.equal(values[500], -8, 'this process sees the client\'s writes')
  t.equal(readHeader(key), BigInt(dataBytes), 'the header was never touched')

  // Deferred unregister over HTTP, then the last lease ends.
  const unregister = await app.inject({ method: 'POST', url: `${SYSTEM}/region/sta_input/unregister` })
  t.equal(unregister.statusCode, 200)
  t.ok(app.systemSharedMemory.has('sta_input'), 'held by the live lease')
  lease.release()
  t.notOk(app.systemSharedMemory.has('sta_input'))
  t.same(mappingsOf(key), [], 'unmapped')
  t.equal(values.length, 0, 'the escaped view reads as empty')

  t.equal(await client.exit(), 0, 'the client exits cleanly')
  t.equal(statSync(objectPath(key)).size, HEADER_BYTES + dataBytes, 'the object stays for its owner to unlink')
})

t.test('registered at offset 0, the same object shows the header first: why offset 8 is needed', { skip }, async (t) => {
  const key = uniqueKey('sta_raw')
  const client = await startClient(t, key, 4)
  const app = await buildApp(t)
  const register = await app.inject({
    method: 'POST', url: `${SYSTEM}/region/raw/register`, payload: registerBody(key, HEADER_BYTES + 16)
  })
  t.equal(register.statusCode, 200, register.body)
  const lease = app.systemSharedMemory.acquire('raw', 0, HEADER_BYTES + 16)
  t.equal(Buffer.from(lease.buffer).readBigUInt64LE(0), 16n, 'the first 8 bytes are the length header')
  t.same([...floatsOf(lease.buffer.subarray(HEADER_BYTES))], [0, 1, 2, 3].map(expected), 'the data follows it')

  const tooFar = await app.inject({
    method: 'POST', url: `${SYSTEM}/region/beyond/register`, payload: registerBody(key, 17, HEADER_BYTES)
  })
  t.equal(tooFar.statusCode, 400, 'the data part is exactly 16 bytes: one more is out of bounds')
  t.same(tooFar.json(), { error: "failed to register shared memory region 'beyond': invalid args" })
  lease.release()
  t.equal(await client.exit(), 0)
})
