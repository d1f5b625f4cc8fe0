/**
 * Who holds leases on which region, in shared memory that every process of a shared registry
 * maps: one counter per (process slot, region slot). Taking and ending a lease is an atomic add on
 * this process's own counter, never a write to the store; an unregister reads the region's
 * counters of every live process. The first cell is the registry's revision, bumped around every
 * change of its records, so that one load tells a process whether it must reread them.
 *
 * The table is a file beside the store (`<store>-leases`), mapped shared as SQLite maps its own
 * `-shm` file: it goes with the store's directory, so no way of stopping can leave it anywhere else.
 */
import { closeSync, constants, ftruncateSync, openSync, rmSync } from 'node:fs'
import { isIntact, mapFile, unmapObject } from '../addon/posix-shm'

/** Most processes that can share one registry. */
export const PROCESS_SLOTS = 128
/** Most regions a shared registry can hold. */
export const REGION_SLOTS = 8192
/** The revision, alone on its cache line. */
const HEADER_CELLS = 16
const BYTE_SIZE = (HEADER_CELLS + PROCESS_SLOTS * REGION_SLOTS) * Int32Array.BYTES_PER_ELEMENT

/** A region's counters are side by side: an unregister reads one short run of memory. */
const cell = (processSlot: number, regionSlot: number) => HEADER_CELLS + regionSlot * PROCESS_SLOTS + processSlot

export class LeaseTable {
  readonly #buffer: ArrayBuffer
  readonly #cells: Int32Array

  /** Maps the table at `path`; if `create`, as a new file (zeroed, mode 0600) in place of any
   * earlier one, which no process maps any more. Never follows a symbolic link. */
  constructor (path: string, create: boolean) {
    if (create) {
      LeaseTable.remove(path)
      const fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)
      try {
        ftruncateSync(fd, BYTE_SIZE)
      } finally {
        closeSync(fd)
      }
    }
    this.#buffer = mapFile(path, BYTE_SIZE)
    this.#cells = new Int32Array(this.#buffer)
  }

  static remove (path: string): void {
    // Already gone is fine: removed by another process leaving at the same time.
    rmSync(path, { force: true })
  }

  /** False once the file was shrunk under the mapping: the counts other processes make are no
   * longer seen here (lib/native/fault-guard.c keeps this process alive, reading zeros). */
  get intact (): boolean {
    return isIntact(this.#buffer)
  }

  // Atomics are sequentially consistent: an unregister that reads the counters after a lease's
  // add sees it, whichever process made it.

  get revision (): number {
    return Atomics.load(this.#cells, 0)
  }

  bumpRevision (): void {
    Atomics.add(this.#cells, 0, 1)
  }

  add (processSlot: number, regionSlot: number, leases: number): void {
    Atomics.add(this.#cells, cell(processSlot, regionSlot), leases)
  }

  /** Whether any of these processes holds leases on the region. */
  held (regionSlot: number, processSlots: number[]): boolean {
    return processSlots.some((processSlot) => Atomics.load(this.#cells, cell(processSlot, regionSlot)) > 0)
  }

  /** Zeroes what processes that are gone left in these cells, before they are used again (a
   * process slot's cells of the regions registered now; a region slot's cells of every process). */
  clear (processSlots: number[], regionSlots: number[]): void {
    for (const processSlot of processSlots) {
      for (const regionSlot of regionSlots) Atomics.store(this.#cells, cell(processSlot, regionSlot), 0)
    }
  }

  close (): void {
    unmapObject(this.#buffer)
  }
}
