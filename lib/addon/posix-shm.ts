/**
 * The typed face of the native addon (lib/native/shm.c): POSIX shared memory objects mapped into
 * this process. Used by the registry (server side) and by clients that create regions.
 */
import { constants } from 'node:buffer'
import { isArrayBuffer } from 'node:util/types'
import type { PeerIdentity } from '../../types'
import { callAddon as call, PosixShmError } from './addon-errors'
import { nativeAddon } from './native-addon'

export { PosixShmError, type PosixShmErrorCode } from './addon-errors'

/** The addon's handle to one mapping (a number, lib/native/handles.h); any of its windows stands
 * for it too. A handle released or unmapped names nothing any more. */
type MappingHandle = number

interface Addon {
  /** With a peer, maps only if that user could open the object read-write too. */
  map(key: string, offset: number, byteSize: number, peer?: PeerIdentity): MappingHandle
  mapFile(path: string, byteSize: number): MappingHandle
  window(mapping: MappingHandle | ArrayBuffer, offset: number, byteSize: number): ArrayBuffer
  /** The mapped object as `<device>:<inode>`. */
  identity(mapping: MappingHandle | ArrayBuffer): string
  /** Unmaps, and releases a handle. */
  unmap(mapping: MappingHandle | ArrayBuffer): boolean
  /** Lets go of a handle without unmapping: the mapping goes with the last of its windows. */
  release(mapping: MappingHandle): void
  intact(mapping: MappingHandle | ArrayBuffer, measure?: boolean): boolean
  reaches(mapping: MappingHandle, offset: number): boolean
  create(key: string, byteSize: number): void
  unlink(key: string): void
}

const addon = nativeAddon as Addon

/**
 * A mapping of `[offset, offset + byteSize)` of an existing object (never created here), read-write
 * and shared. Its bytes are seen through windows: ArrayBuffers over parts of it, each at most
 * `MappedRange.maxWindowBytes` long, so a range larger than the largest ArrayBuffer this Node
 * allows is mapped once and still reachable everywhere. `unmap` detaches every window first.
 *
 * A range is held like a file descriptor: `unmap` it when done. One dropped without `unmap` stays
 * mapped (with its descriptor open) until its thread's Node environment ends, when the addon
 * unmaps what is left. No finalizer watches it: one would add about a tenth to every register.
 */
export class MappedRange {
  /** The largest ArrayBuffer this Node makes over outside memory (2^32 bytes on Node 20). */
  static readonly maxWindowBytes: number = constants.MAX_LENGTH
  readonly byteSize: number
  /** The mapped object as `<device>:<inode>`: equal for two mappings of one object, whatever their keys. */
  readonly object: string
  readonly #handle: MappingHandle
  #whole: ArrayBuffer | undefined

  /**
   * With a `peer` (the client the range is mapped for: lib/addon/peer-identity.ts), the object is
   * mapped only if that user could open it read-write as well, as access(2) decides from the
   * object's owner, group and mode (root may open anything); else ERR_SHM_PEER_DENIED, and nothing
   * is mapped or left open. The check is made on the descriptor that is mapped, after it is open.
   */
  constructor (key: string, offset: number, byteSize: number, peer?: PeerIdentity) {
    this.#handle = call(() => addon.map(key, offset, byteSize, peer))
    this.byteSize = byteSize
    this.object = addon.identity(this.#handle)
  }

  /** The whole range as one window, made at its first use, where one ArrayBuffer can hold it (a
   * view of it then needs no native call); undefined for a larger range. */
  get whole (): ArrayBuffer | undefined {
    if (this.byteSize > MappedRange.maxWindowBytes) return undefined
    this.#whole ??= this.window(0, this.byteSize)
    return this.#whole
  }

  /** An ArrayBuffer over `[offset, offset + byteSize)` of the range. */
  window (offset: number, byteSize: number): ArrayBuffer {
    if (byteSize > MappedRange.maxWindowBytes) throw new PosixShmError('ERR_SHM_WINDOW_TOO_LARGE')
    return call(() => addon.window(this.#handle, offset, byteSize))
  }

  /** See `isIntact`. */
  get intact (): boolean {
    return addon.intact(this.#handle)
  }

  /** `intact` as far as this process knows without measuring the object (no system call): false
   * once a page past its end was touched (the fault guard caught it), or once it is unmapped. */
  get untouchedPastEnd (): boolean {
    return addon.intact(this.#handle, false)
  }

  /**
   * Whether byte `offset` of the range is still the object's, found without a system call: the
   * byte is read, and a page the object no longer has (its owner truncated it) faults, which the
   * fault guard turns into zeros and a poisoned range. A truncation cuts the object's end, so every
   * byte before one that is there is there too. False once poisoned or unmapped; an offset past the
   * range throws `ERR_SHM_OUT_OF_BOUNDS`. (A truncation within a byte's page leaves the page: the
   * byte reads zero, and is not seen as gone.)
   */
  reaches (offset: number): boolean {
    return call(() => addon.reaches(this.#handle, offset))
  }

  /** Unmaps now; every window reads as length 0 from then on. False if it was unmapped already. */
  unmap (): boolean {
    return call(() => addon.unmap(this.#handle))
  }
}

/**
 * Maps `[offset, offset + byteSize)` of the existing object `key`, read-write and shared, as one
 * ArrayBuffer (so at most `MappedRange.maxWindowBytes` long). The object must exist (it is never
 * created here) and be large enough.
 */
export function mapObject (key: string, offset: number, byteSize: number): ArrayBuffer {
  return soleWindow(call(() => addon.map(key, offset, byteSize)), byteSize)
}

/**
 * Maps `[0, byteSize)` of the existing regular file at `path` (never through a symbolic link),
 * read-write and shared, as one ArrayBuffer: a file shared the way an object is, which goes with
 * the directory it is in. `isIntact` and `unmapObject` take the buffer.
 */
export function mapFile (path: string, byteSize: number): ArrayBuffer {
  return soleWindow(call(() => addon.mapFile(path, byteSize)), byteSize)
}

/** One window over the whole of a new mapping, which then owns it: the mapping goes with
 * `unmapObject` or with the buffer's collection. */
function soleWindow (handle: MappingHandle, byteSize: number): ArrayBuffer {
  try {
    if (byteSize > MappedRange.maxWindowBytes) throw new PosixShmError('ERR_SHM_WINDOW_TOO_LARGE')
    return call(() => addon.window(handle, 0, byteSize))
  } finally {
    // The handle lets go: the window holds the mapping now, or, without one, this unmaps it.
    addon.release(handle)
  }
}

/**
 * Unmaps a buffer returned by `mapObject` or `mapFile`. The buffer is detached first, so every view over it
 * reads as length 0 from now on. Returns false if it was unmapped already.
 */
export function unmapObject (buffer: ArrayBuffer): boolean {
  return call(() => addon.unmap(ownWindow(buffer)))
}

/** Only an ArrayBuffer is passed on: the addon takes a number for one of its own mapping handles
 * (a guessed one could name a live mapping), and handles never leave this module. */
function ownWindow (buffer: ArrayBuffer): ArrayBuffer {
  if (!isArrayBuffer(buffer)) throw new PosixShmError('ERR_INVALID_ARG')
  return buffer
}

/**
 * False if the mapped range no longer lies inside the object: its owner shrank it (ftruncate), or
 * a page past its end was touched and replaced with zeros to survive the SIGBUS (see
 * lib/native/fault-guard.c). Also false once unmapped.
 */
export function isIntact (buffer: ArrayBuffer): boolean {
  return call(() => addon.intact(ownWindow(buffer)))
}

/** Creates a new object of `byteSize` zero bytes, readable and writable by this user only. */
export function createObject (key: string, byteSize: number): void {
  call(() => addon.create(key, byteSize))
}

/** Removes the object's name; processes that mapped it keep their mapping. */
export function unlinkObject (key: string): void {
  call(() => addon.unlink(key))
}
