/**
 * Things in the kernel's shm directory that are not regular shared memory objects (a directory,
 * a FIFO, a symbolic link), made with unique names and removed when the test ends.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync, symlinkSync } from 'node:fs'
import type { Test } from 'tap'
import { objectPath, uniqueKey } from './shm'

function made (t: Test, key: string, make: (path: string) => void): string {
  const path = objectPath(key)
  make(path)
  t.teardown(() => rmSync(path, { recursive: true, force: true }))
  return key
}

/** A directory in /dev/shm; returns the key naming it. */
export const makeDirectory = (t: Test, label = 'directory') => made(t, uniqueKey(label), (path) => mkdirSync(path))

/** A FIFO in /dev/shm (opening it read-write does not block); returns the key naming it. */
export const makeFifo = (t: Test, label = 'fifo') => made(t, uniqueKey(label), (path) => execFileSync('mkfifo', [path]))

/** A symbolic link in /dev/shm to `target`; returns the key naming it. */
export const makeSymlink = (t: Test, target: string, label = 'symlink') =>
  made(t, uniqueKey(label), (path) => symlinkSync(target, path))
