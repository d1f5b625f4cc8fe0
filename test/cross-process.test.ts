/**
 * Shared memory is shared with other processes: bytes written through a lease are read by a
 * separate Node process through the object's file, and the other way round.
 */
import { type ChildProcessWithoutNullStreams, execFile, spawn } from 'node:child_process'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { Registry } from '../lib/registry/registry'
import { buildApp, registerBody, SYSTEM } from './helpers/app'
import { makeObject, mappingsOf, objectPath, PAGE_SIZE, uniqueKey, unlinkOnTeardown } from './helpers/shm'

const run = promisify(execFile)
const PEER = path.join(__dirname, 'fixtures', 'shm-peer.js')

interface Peer {
  pid: number
  read (position: number, length: number): Promise<number[]>
  write (position: number, bytes: number[]): Promise<void>
}

/** A long-lived child process (test/fixtures/shm-peer.js) with the object's file open. */
async function startPeer (t: Test, key: string): Promise<Peer> {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, [PEER, objectPath(key)])
  t.teardown(() => { if (child.exitCode === null) child.kill() })
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const next = async (): Promise<Record<string, unknown>> => {
    const { value, done } = await lines.next()
    if (done === true) throw new Error('the peer process ended')
    return JSON.parse(value)
  }
  const send = async (command: object) => {
    child.stdin.write(`${JSON.stringify(command)}\n`)
    return next()
  }
  const hello = await next()
  return {
    pid: hello.pid as number,
    read: async (position, length) => (await send({ op: 'read', position, length })).bytes as number[],
    write: async (position, bytes) => { await send({ op: 'write', position, bytes }) }
  }
}

/** Runs a short Node script in a new process and returns what it printed. */
async function runNode (script: string, ...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ['-e', script, ...args])
  return stdout
}

t.test('a lease and another process see each other\'s writes, while both hold the object', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, 3 * PAGE_SIZE, 'peer')
  const regionOffset = PAGE_SIZE + 17 // not page-aligned: the mapping points into a page
  registry.register('shared', { key, offset: regionOffset, byteSize: 1000 })
  const lease = registry.acquire('shared', 100, 200)
  const peer = await startPeer(t, key)
  t.not(peer.pid, process.pid, 'the peer is another process')
  t.equal(mappingsOf(key).length, 1, 'this process maps the object')

  const objectPosition = regionOffset + 100 // where the lease starts inside the object
  const pattern = Array.from({ length: 200 }, (_, index) => (index * 31 + 7) & 0xff)
  lease.buffer.set(pattern)
  t.same(await peer.read(objectPosition, 200), pattern, 'the peer reads what the lease wrote, at the right place')
  t.same(await peer.read(objectPosition - 1, 1), [0], 'the byte before the lease is untouched')
  t.same(await peer.read(objectPosition + 200, 1), [0], 'the byte after the lease is untouched')

  await peer.write(objectPosition + 50, [0xde, 0xad, 0xbe, 0xef])
  t.same([...lease.buffer.subarray(50, 54)], [0xde, 0xad, 0xbe, 0xef], 'the lease sees what the peer wrote')
  await peer.write(objectPosition + 199, [0x11])
  t.equal(lease.buffer[199], 0x11, 'up to its last byte')

  // Ping-pong: each side increments a counter the other one wrote.
  const counter = new DataView(lease.buffer.buffer, lease.buffer.byteOffset + 8, 4)
  counter.setUint32(0, 0, true)
  for (let round = 0; round < 20; round++) {
    const [value] = new Uint32Array(Uint8Array.from(await peer.read(objectPosition + 8, 4)).buffer)
    t.equal(value, round * 2, `round ${round}: the peer reads the counter`)
    const next = Buffer.alloc(4)
    next.writeUInt32LE(value + 1)
    await peer.write(objectPosition + 8, [...next])
    t.equal(counter.getUint32(0, true), round * 2 + 1, `round ${round}: this process reads the peer's increment`)
    counter.setUint32(0, counter.getUint32(0, true) + 1, true)
  }
  lease.release()
})

t.test('a region created by another process is served over HTTP, and outlives its unlink', async (t) => {
  const app = await buildApp(t)
  const key = uniqueKey('client')
  unlinkOnTeardown(t, key)
  const file = objectPath(key)

  // The client process creates the object (as shm_open(O_CREAT) + ftruncate would) and fills it.
  const created = await runNode(`
    const { writeFileSync } = require('node:fs')
    const values = new Float32Array(256).map((_, index) => index * 0.5 - 10)
    writeFileSync(process.argv[1], new Uint8Array(values.buffer), { mode: 0o600 })
    process.stdout.write(String(process.pid))`, file)
  t.not(Number(created), process.pid, 'made by another process')

  const register = await app.inject({ method: 'POST', url: `${SYSTEM}/region/input/register`, payload: registerBody(key, 1024) })
  t.equal(register.statusCode, 200, register.body)
  const lease = app.systemSharedMemory.acquire('input', 16, 64)
  const floats = new Float32Array(lease.buffer.buffer, lease.buffer.byteOffset, 16)
  t.same([...floats], Array.from({ length: 16 }, (_, index) => (index + 4) * 0.5 - 10), 'this process reads the client\'s data')

  floats.set([1.25, -2.5, 3.75])
  const seen = await runNode(`
    const { readFileSync } = require('node:fs')
    const bytes = readFileSync(process.argv[1])
    process.stdout.write(JSON.stringify([...new Float32Array(bytes.buffer, bytes.byteOffset + 16, 4)]))`, file)
  t.same(JSON.parse(seen), [1.25, -2.5, 3.75, (7 * 0.5) - 10], 'the client reads what this process wrote')

  await runNode("require('node:fs').unlinkSync(process.argv[1])", file)
  floats[3] = 42
  t.equal(floats[3], 42, 'the mapping outlives the unlink by another process')
  t.equal(floats[0], 1.25)
  const again = await app.inject({ method: 'POST', url: `${SYSTEM}/region/again/register`, payload: registerBody(key, 1024) })
  t.equal(again.statusCode, 400)
  t.same(again.json(), { error: `Unable to open shared memory region: '${key}'` }, 'but the name is gone')

  lease.release()
  const unregister = await app.inject({ method: 'POST', url: `${SYSTEM}/region/input/unregister` })
  t.equal(unregister.statusCode, 200)
  t.same(mappingsOf(key), [], 'unmapped once unregistered')
})

t.test('two registrations in this process and a peer all share the same bytes', async (t) => {
  const registry = new Registry()
  t.teardown(() => registry.close())
  const key = makeObject(t, PAGE_SIZE, 'three')
  registry.register('whole', { key, byteSize: PAGE_SIZE })
  registry.register('tail', { key, offset: PAGE_SIZE - 10, byteSize: 10 })
  const whole = registry.acquire('whole', 0, PAGE_SIZE)
  const tail = registry.acquire('tail', 0, 10)
  const peer = await startPeer(t, key)

  await peer.write(PAGE_SIZE - 10, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
  t.same([...tail.buffer], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
  t.same([...whole.buffer.subarray(PAGE_SIZE - 10)], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
  tail.buffer[9] = 99
  t.equal(whole.buffer[PAGE_SIZE - 1], 99)
  t.same(await peer.read(PAGE_SIZE - 1, 1), [99])

  // After this process unregisters, the peer's data stays in the object.
  whole.release()
  tail.release()
  registry.unregisterAll()
  t.same(mappingsOf(key), [])
  t.same(await peer.read(PAGE_SIZE - 10, 10), [1, 2, 3, 4, 5, 6, 7, 8, 9, 99], 'the object keeps its bytes')
})
