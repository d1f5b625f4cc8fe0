/**
 * The addon's errors, typed: a failed system call as its errno name (`ENOENT`, `EACCES`, ...), or
 * one of the addon's own checks, as a `PosixShmError`. Every typed face of the addon calls it
 * through `callAddon`.
 */
import { getSystemErrorName } from 'node:util'

/** What went wrong, as a code: an errno name (`ENOENT`, `EACCES`, ...) or one of the checks below. */
export type PosixShmErrorCode =
  | 'ERR_SHM_NOT_REGULAR' // the key names something other than a regular shared memory object
  | 'ERR_SHM_OUT_OF_BOUNDS' // byte size 0, or the range does not fit in the object (or the mapping)
  | 'ERR_SHM_WINDOW_TOO_LARGE' // more bytes than one ArrayBuffer of this Node can hold
  | 'ERR_SHM_UNMAPPED' // a window was asked of a mapping that is unmapped already
  | 'ERR_SHM_PEER_DENIED' // the peer given could not itself open the object read-write
  | 'ERR_INVALID_ARG'
  | string

export class PosixShmError extends Error {
  readonly code: PosixShmErrorCode
  /** The failed system call, when one failed. */
  readonly syscall?: string

  constructor (code: PosixShmErrorCode, syscall?: string) {
    super(syscall === undefined ? code : `${syscall} failed: ${code}`)
    this.name = 'PosixShmError'
    this.code = code
    this.syscall = syscall
  }
}

/** What the addon throws: `syscall` and `errno` when a system call failed, else a `code` of its own. */
type NativeError = { syscall: string, errno: number } | { code: string, syscall: undefined }

function typed (error: unknown): PosixShmError {
  const native = error as NativeError
  return native.syscall === undefined
    ? new PosixShmError(native.code)
    : new PosixShmError(getSystemErrorName(-native.errno), native.syscall)
}

/** Whether the addon threw `error`; JavaScript run inside a call (a peer's getter) throws its own. */
const isNative = (error: unknown): boolean =>
  typeof (error as { syscall?: unknown }).syscall === 'string' || typeof (error as { code?: unknown }).code === 'string'

function call<T> (operation: () => T): T {
  try {
    return operation()
  } catch (error) {
    throw isNative(error) ? typed(error) : error
  }
}

/** Runs a call of the addon, its errors made PosixShmErrors. */
export { call as callAddon }
