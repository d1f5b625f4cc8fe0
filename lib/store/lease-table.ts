/**
 * Who holds leases on which region, in shared memory that every process of a shared registry
 * maps: one counter per (process slot, region slot), 1 while that process holds leases on that
 * region (from its first lease there to the end of its last), else 0. A process writes only its
 * own counters, and never the store, to take and end leases; an unregister reads the region's
 * counters of every live process. The first cell is the registry's revision, bumped around every
 * change of its records, so that one load tells a process whether it must reread them (any value
 * is a revision: a stray write there costs every process one reread).
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

/** A counter that is neither 0 nor 1, found by `held`: written by something other than this code. */
export interface DamagedCounter { processSlot: number, regionSlot: number, value: number }

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

  /** Records whether a process holds leases on a region: only that process calls it, for its own slot. */
  setHolding (processSlot: number, regionSlot: number, holding: boolean): void {
    Atomics.store(this.#cells, cell(processSlot, regionSlot), holding ? 1 : 0)
  }

  /**
   * Whether any of these processes holds leases on the region. A counter that is neither 0 nor 1
   * was damaged (a stray write into the file): it cannot say its process holds the region, so it
   * counts as no lease rather than hold an unregister for as long as that process lives. That
   * process's own leases stay safe (it keeps its mapping until its last lease ends); its counter
   * is reset to 0, unless the process wrote it meanwhile, and reported to `damaged`.
   */
  held (regionSlot: number, processSlots: number[], damaged: (counter: DamagedCounter) => void): boolean {
    let held = false
    for (const processSlot of processSlots) {
      const index = cell(processSlot, regionSlot)
      const value = Atomics.load(this.#cells, index)
      if (value === 1) {
        held = true
      } else if (value !== 0) {
        Atomics.compareExchange(this.#cells, index, value, 0)
        damaged({ processSlot, regionSlot, value })
      }
    }
    return held
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
