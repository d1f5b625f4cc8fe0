/**
 * A trace file: traces appended in batches, each batch one write of whole lines to a file opened
 * with O_APPEND, so the batches of several processes appending to one file never interleave
 * inside a line. At most one write is in flight: traces that arrive meanwhile wait for the next
 * batch, and the event loop never waits on the disk.
 */
import { type FileHandle, open } from 'node:fs/promises'

/** Where a file that cannot be written is reported (its traces are dropped). */
export interface TraceFileLogger {
  error(details: object, message: string): void
}

/** A batch is written once it holds this many bytes, whatever `log_frequency` says: what waits
 * stays bounded. */
export const MAX_PENDING_TRACE_BYTES = 1024 * 1024

export class TraceFile {
  readonly path: string
  readonly #log: TraceFileLogger | undefined
  #pending: string[] = []
  #pendingBytes = 0
  #handle: Promise<FileHandle> | undefined
  #writing: Promise<void> | undefined

  constructor (path: string, log?: TraceFileLogger) {
    this.path = path
    this.#log = log
  }

  /** Adds one trace (a line); writes the batch once it holds `logFrequency` traces (0: at once). */
  add (line: string, logFrequency: number): void {
    this.#pending.push(line)
    this.#pendingBytes += line.length
    if (this.#pending.length >= logFrequency || this.#pendingBytes >= MAX_PENDING_TRACE_BYTES) this.#write()
  }

  #write (): Promise<void> {
    this.#writing ??= this.#drain().finally(() => { this.#writing = undefined })
    return this.#writing
  }

  async #drain (): Promise<void> {
    try {
      const handle = await (this.#handle ??= open(this.path, 'a'))
      while (this.#pending.length > 0) {
        const batch = Buffer.from(this.#pending.join(''))
        this.#pending = []
        this.#pendingBytes = 0
        let written = 0
        while (written < batch.length) written += (await handle.write(batch, written)).bytesWritten
      }
    } catch (error) {
      this.#log?.error({ err: error, file: this.path }, 'failed writing trace file')
      this.#pending = []
      this.#pendingBytes = 0
      // Opened again by the next trace: the file may be writable by then.
      const handle = this.#handle as Promise<FileHandle>
      this.#handle = undefined
      handle.then((opened) => opened.close()).catch(() => {})
    }
  }

  /** Resolves once the batch being written, if any, is in the file (traces still waiting for
   * their batch are not written). */
  async settled (): Promise<void> {
    await this.#writing
  }

  /** Writes every trace added so far; resolves once they are in the file. */
  async flush (): Promise<void> {
    await this.settled()
    if (this.#pending.length > 0) await this.#write()
  }

  /** Writes what waits and closes the file (a later trace opens it again). */
  async close (): Promise<void> {
    await this.flush()
    const handle = this.#handle
    this.#handle = undefined
    await (await handle)?.close()
  }
}
