/**
 * A trace file as Triton writes one (`trace_mode: triton`): one JSON array of the traces' objects,
 * its `[` written with the first trace and its `]` once the server stops; and its numbered files,
 * `<file>.<N>` (N counted from 0), each a whole array of one batch of traces. Like Triton's, the
 * file starts anew (truncated) with its first trace, and again with the first after a stop. The
 * event loop never waits on the disk: one write to the array at a time. Traces wait to be written
 * together, as Triton's buffered file stream makes them: until 64 KiB of them wait, or the first
 * has waited 100 ms, or a flush; a server that traces every request writes a few large writes,
 * not one per trace (each a trip to the thread pool).
 */
import { type FileHandle, open, writeFile } from 'node:fs/promises'

/** Where a file that cannot be written is reported (its traces are dropped). */
export interface TraceFileLogger {
  error(details: object, message: string): void
}

/** Traces written at once when this many bytes of them wait. */
export const TRACE_WRITE_BYTES = 64 * 1024
/** The longest a trace waits for its write. */
export const TRACE_WRITE_DELAY_MS = 100

async function writeWhole (handle: FileHandle, text: string): Promise<void> {
  const bytes = Buffer.from(text)
  let written = 0
  while (written < bytes.length) written += (await handle.write(bytes, written)).bytesWritten
}

export class TraceFile {
  readonly path: string
  readonly #log: TraceFileLogger | undefined
  /** Traces waiting for the next write to the array, each its objects joined by commas. */
  #pending: string[] = []
  #pendingBytes = 0
  /** Set while traces wait for their write's delay. */
  #delay: NodeJS.Timeout | undefined
  #handle: Promise<FileHandle> | undefined
  /** The array's `[` is written: the next trace follows a comma. */
  #begun = false
  #writing: Promise<void> | undefined
  /** The number of the next numbered file. */
  #index = 0
  readonly #numbered = new Set<Promise<void>>()

  readonly #writeDelayMs: number

  /** `writeDelayMs`: the longest a trace waits for its write (default 100 ms). */
  constructor (path: string, log?: TraceFileLogger, writeDelayMs = TRACE_WRITE_DELAY_MS) {
    this.path = path
    this.#log = log
    this.#writeDelayMs = writeDelayMs
  }

  /** Adds one trace to the array: written with the others waiting, within the write delay. */
  add (trace: string): void {
    this.#pending.push(trace)
    this.#pendingBytes += trace.length
    if (this.#pendingBytes >= TRACE_WRITE_BYTES) this.#write()
    // Not holding the process open: a stop writes what waits.
    else this.#delay ??= setTimeout(() => this.#write(), this.#writeDelayMs).unref()
  }

  /** Writes `traces` as the next numbered file, `<file>.<N>`: a whole array. */
  addNumbered (traces: readonly string[]): void {
    const name = `${this.path}.${this.#index++}`
    const writing: Promise<void> = writeFile(name, `[${traces.join(',')}]`)
      .catch((error: unknown) => this.#failed(error, name))
      .finally(() => this.#numbered.delete(writing))
    this.#numbered.add(writing)
  }

  #failed (error: unknown, file: string): void {
    this.#log?.error({ err: error, file }, 'failed writing trace file')
  }

  #write (): void {
    this.#writing ??= this.#drain().finally(() => { this.#writing = undefined })
  }

  /** Takes the traces that wait (their delay ends): the text that adds them to the array. */
  #take (): string {
    clearTimeout(this.#delay)
    this.#delay = undefined
    const text = (this.#begun ? ',' : '[') + this.#pending.join(',')
    this.#pending = []
    this.#pendingBytes = 0
    this.#begun = true
    return text
  }

  async #drain (): Promise<void> {
    try {
      const handle = await (this.#handle ??= open(this.path, 'w'))
      while (this.#pending.length > 0) await writeWhole(handle, this.#take())
    } catch (error) {
      this.#failed(error, this.path)
      this.#take()
      // The next trace starts the file again: it may be writable by then.
      this.#begun = false
      const handle = this.#handle as Promise<FileHandle>
      this.#handle = undefined
      handle.then((opened) => opened.close()).catch(() => {})
    }
  }

  /** Resolves once every trace added so far, and every numbered file, is written. */
  async flush (): Promise<void> {
    if (this.#pending.length > 0) this.#write()
    // A trace added during the write is written by it too.
    while (this.#writing !== undefined) await this.#writing
    await Promise.all(this.#numbered)
  }

  /** Writes what waits and ends the array with its `]` (a later trace starts the file anew). */
  async close (): Promise<void> {
    await this.flush()
    const handle = this.#handle
    if (handle === undefined) return
    this.#handle = undefined
    this.#begun = false
    const opened = await handle
    try {
      await writeWhole(opened, ']')
    } catch (error) {
      this.#failed(error, this.path)
    } finally {
      await opened.close()
    }
  }
}
