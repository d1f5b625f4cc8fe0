/**
 * A trace file as Triton writes one (`trace_mode: triton`): one JSON array of the traces' objects,
 * its `[` written with the first trace and its `]` once the server stops; and its numbered files,
 * `<file>.<N>` (N counted from 0), each a whole array of one batch of traces. Like Triton's, the
 * file starts anew (truncated) with its first trace, and again with the first after a stop. The
 * event loop never waits on the disk: one write to the array at a time, the traces that arrive
 * meanwhile going together into the next one.
 */
import { type FileHandle, open, writeFile } from 'node:fs/promises'

/** Where a file that cannot be written is reported (its traces are dropped). */
export interface TraceFileLogger {
  error(details: object, message: string): void
}

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
  #handle: Promise<FileHandle> | undefined
  /** The array's `[` is written: the next trace follows a comma. */
  #begun = false
  #writing: Promise<void> | undefined
  /** The number of the next numbered file. */
  #index = 0
  readonly #numbered = new Set<Promise<void>>()

  constructor (path: string, log?: TraceFileLogger) {
    this.path = path
    this.#log = log
  }

  /** Adds one trace to the array: written at once, or with the next write if one is under way. */
  add (trace: string): void {
    this.#pending.push(trace)
    this.#write()
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

  #write (): Promise<void> {
    this.#writing ??= this.#drain().finally(() => { this.#writing = undefined })
    return this.#writing
  }

  async #drain (): Promise<void> {
    try {
      const handle = await (this.#handle ??= open(this.path, 'w'))
      while (this.#pending.length > 0) {
        const text = (this.#begun ? ',' : '[') + this.#pending.join(',')
        this.#pending = []
        this.#begun = true
        await writeWhole(handle, text)
      }
    } catch (error) {
      this.#failed(error, this.path)
      this.#pending = []
      // The next trace starts the file again: it may be writable by then.
      this.#begun = false
      const handle = this.#handle as Promise<FileHandle>
      this.#handle = undefined
      handle.then((opened) => opened.close()).catch(() => {})
    }
  }

  /** Resolves once every trace added so far, and every numbered file, is written. */
  async flush (): Promise<void> {
    // A trace added meanwhile starts a write of its own: waited for too.
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
