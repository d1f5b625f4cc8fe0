/**
 * The client's side of a region: a POSIX shared memory object a client creates (or opens) and
 * maps, to put its input tensors in and read its outputs from.
 */
import { createObject, mapObject, unlinkObject, unmapObject } from '../addon/posix-shm'

/** A POSIX shared memory object this process created (or opened) and mapped. */
export class SharedMemoryObject {
  /** The mapped bytes; length 0 once closed. */
  readonly bytes: Uint8Array
  readonly #mapping: ArrayBuffer

  private constructor (readonly key: string, readonly byteSize: number) {
    this.#mapping = mapObject(key, 0, byteSize)
    this.bytes = new Uint8Array(this.#mapping)
  }

  /** Creates a new object of `byteSize` zero bytes (mode 0600) and maps it. */
  static create (key: string, byteSize: number): SharedMemoryObject {
    createObject(key, byteSize)
    try {
      return new SharedMemoryObject(key, byteSize)
    } catch (error) {
      unlinkObject(key)
      throw error
    }
  }

  /** Maps the first `byteSize` bytes of an existing object. */
  static open (key: string, byteSize: number): SharedMemoryObject {
    return new SharedMemoryObject(key, byteSize)
  }

  /** Unmaps; views over `bytes` read as empty afterwards. */
  close (): void {
    unmapObject(this.#mapping)
  }

  /** Unmaps and removes the object's name. */
  destroy (): void {
    this.close()
    unlinkObject(this.key)
  }
}
