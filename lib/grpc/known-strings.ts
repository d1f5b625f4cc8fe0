/**
 * Strings a decoder meets in message after message (parameter names, datatypes), recognised in
 * their bytes instead of decoded: decoding makes a new string each time, and a new string used as
 * a key then costs a lookup in V8's string table, where a constant is found at once.
 */
export class KnownStrings {
  readonly #byLength = new Map<number, Array<{ text: string, bytes: Buffer }>>()

  constructor (texts: Iterable<string>) {
    for (const text of texts) {
      const bytes = Buffer.from(text)
      this.#byLength.set(bytes.length, [...this.#byLength.get(bytes.length) ?? [], { text, bytes }])
    }
  }

  /** The UTF-8 text of `[start, end)` in `buffer`: a known string's constant when the bytes spell it. */
  read (buffer: Buffer, start: number, end: number): string {
    const candidates = this.#byLength.get(end - start)
    if (candidates !== undefined) {
      for (const { text, bytes } of candidates) if (spells(buffer, start, bytes)) return text
    }
    return buffer.toString('utf8', start, end)
  }
}

function spells (buffer: Buffer, start: number, bytes: Buffer): boolean {
  for (let index = 0; index < bytes.length; index++) if (buffer[start + index] !== bytes[index]) return false
  return true
}
