/**
 * Real POSIX shared memory for tests: objects with names unique to this run, removed when the
 * test ends, pass or fail.
 */
import { randomBytes } from 'node:crypto'
import { closeSync, openSync, readdirSync, readFileSync, readSync, rmSync, writeSync } from 'node:fs'
import type { Test } from 'tap'
import { createObject, PosixShmError, unlinkObject } from '../../lib/addon/posix-shm'

export const PAGE_SIZE = 4096

let sequence = 0

/** A key no other test or run uses: `/fts_<pid>_<random>_<n>_<label>`. */
export function uniqueKey (label = 'region'): string {
  return `/fts_${process.pid}_${randomBytes(3).toString('hex')}_${sequence++}_${label}`
}

/** Unlinks `key` when the test ends; an object already gone is fine. */
export function unlinkOnTeardown (t: Test, key: string): void {
  t.teardown(() => {
    try {
      unlinkObject(key)
    } catch (error) {
      if ((error as { code?: string }).code !== 'ENOENT') throw error
    }
  })
}

/** Creates an object of `byteSize` zero bytes, unlinked when the test ends. Returns its key. */
export function makeObject (t: Test, byteSize: number, label?: string): string {
  const key = uniqueKey(label)
  createObject(key, byteSize)
  unlinkOnTeardown(t, key)
  return key
}

/** The object's file in the kernel's shm directory, to read or write it as another program would. */
export const objectPath = (key: string) => `/dev/shm/${key.replace(/^\/+/, '')}`

/** Objects of the shm directory whose names hold `suffix` (a run's random suffix). */
export const shmLeftovers = (suffix: string): string[] => readdirSync('/dev/shm').filter((name) => name.includes(suffix))

/** Removes, when the test ends, whatever objects named with `suffix` a failed run left behind. */
export function removeLeftoversOnTeardown (t: Test, suffix: string): void {
  t.teardown(() => {
    for (const name of shmLeftovers(suffix)) rmSync(objectPath(name), { force: true })
  })
}

/** Writes `bytes` into the object's file at `position`, as another program would (no mapping). */
export function writeObjectFile (key: string, position: number, bytes: Uint8Array | number[]): void {
  const fd = openSync(objectPath(key), 'r+')
  try {
    writeSync(fd, Uint8Array.from(bytes), 0, bytes.length, position)
  } finally {
    closeSync(fd)
  }
}

/** Reads `length` bytes of the object's file at `position`, as another program would. */
export function readObjectFile (key: string, position: number, length: number): number[] {
  const bytes = Buffer.alloc(length)
  const fd = openSync(objectPath(key), 'r')
  try {
    readSync(fd, bytes, 0, length, position)
  } finally {
    closeSync(fd)
  }
  return [...bytes]
}

/** Lines of /proc/self/maps that map objects of the shm directory. */
export const shmMappings = (): string[] =>
  readFileSync('/proc/self/maps', 'utf8').split('\n').filter((line) => line.includes('/dev/shm/'))

/** Lines of /proc/self/maps that map `key`. */
export const mappingsOf = (key: string): string[] =>
  shmMappings().filter((line) => line.endsWith(objectPath(key)) || line.endsWith(`${objectPath(key)} (deleted)`))

export const openFdCount = (): number => readdirSync('/proc/self/fd').length

/** Runs `operation`, which must throw a PosixShmError with this code (and syscall, if any). */
export function throwsShm (t: Test, operation: () => unknown, code: string, syscall?: string, label = code) {
  let thrown: unknown
  try {
    operation()
  } catch (error) {
    thrown = error
  }
  t.type(thrown, PosixShmError, `${label}: throws a PosixShmError`)
  const error = thrown as PosixShmError
  t.equal(error?.name, 'PosixShmError', `${label}: name`)
  t.equal(error?.code, code, `${label}: code`)
  t.equal(error?.syscall, syscall, `${label}: syscall`)
  t.equal(error?.message, syscall === undefined ? code : `${syscall} failed: ${code}`, `${label}: message`)
}
