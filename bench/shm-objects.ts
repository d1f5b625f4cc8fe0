/**
 * The POSIX shared memory objects a bench makes: unique names (this process's pid and a random
 * tag), and removal of every one of them when the bench ends, whether it succeeds, fails or is
 * interrupted.
 */
import { randomBytes } from 'node:crypto'
import { SharedMemoryObject } from '../lib/index'
import { unlinkObject } from '../lib/addon/posix-shm'

const RUN_TAG = `fastify_triton_shm_bench_${process.pid}_${randomBytes(4).toString('hex')}`
const made = new Map<string, SharedMemoryObject>()
let counter = 0

/** Removes every object still made by this process; safe to call more than once. */
export function removeAllObjects (): void {
  for (const [key, object] of made) {
    try {
      object.close()
    } catch {}
    try {
      unlinkObject(key)
    } catch {}
  }
  made.clear()
}

process.on('exit', removeAllObjects)
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    process.stderr.write(`\n${signal}: cleaning up\n`)
    process.exit(128 + (signal === 'SIGINT' ? 2 : signal === 'SIGTERM' ? 15 : 1))
  })
}

/** A new object of `byteSize` zero bytes (sparse until written), mapped into this process. */
export function makeObject (purpose: string, byteSize: number): SharedMemoryObject {
  const key = `/${RUN_TAG}_${purpose}_${counter++}`
  const object = SharedMemoryObject.create(key, byteSize)
  made.set(key, object)
  return object
}

/** Unmaps and removes one object made by `makeObject`. */
export function removeObject (object: SharedMemoryObject): void {
  if (!made.delete(object.key)) return
  object.destroy()
}
