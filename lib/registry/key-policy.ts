/**
 * Which keys a client may register. Every check here runs before anything touches the file
 * system: a key names an object in /dev/shm, so it must name nothing else.
 */
import type { KeyRule } from '../../types'
import { invalidKey, reservedKey } from '../errors'

/** Objects that belong to other components of an inference server (Triton's Python backend). The
 * package itself keeps nothing in /dev/shm: a shared registry's lease table lives beside its store. */
export const DEFAULT_RESERVED_KEY_PREFIXES: readonly string[] = ['triton_python_backend_shm_region_']

/** The kernel's NAME_MAX: longer keys can never name an object. */
const KEY_MAX_BYTES = 255

/** The object's name as shm_open sees it: POSIX allows, and clients send, leading slashes. (A
 * loop, not a regular expression: this runs on every register.) */
function objectNameOf (key: string): string {
  let start = 0
  while (key.charCodeAt(start) === 0x2f) start++
  return key.slice(start)
}

/** True for keys that could name anything but one object directly inside the shm directory. */
function isMalformed (key: string, objectName: string): boolean {
  return objectName === '' ||
    objectName === '.' ||
    objectName === '..' ||
    objectName.includes('/') ||
    key.includes('\0') ||
    Buffer.byteLength(key) > KEY_MAX_BYTES
}

/** The rule as a predicate. A pattern is copied without the g and y flags, whose `lastIndex`
 * would make `test` answer differently for the same key on alternate calls. */
function predicateOf (rule: KeyRule): (key: string) => boolean {
  if (typeof rule === 'function') return (key) => rule(key) === true
  const pattern = new RegExp(rule.source, rule.flags.replace(/[gy]/g, ''))
  return (key) => pattern.test(key)
}

export class KeyPolicy {
  readonly #reservedPrefixes: readonly string[]
  readonly #allows?: (key: string) => boolean

  constructor (allowKey?: KeyRule, reservedKeyPrefixes: readonly string[] = []) {
    this.#allows = allowKey === undefined ? undefined : predicateOf(allowKey)
    this.#reservedPrefixes = [...DEFAULT_RESERVED_KEY_PREFIXES, ...reservedKeyPrefixes]
  }

  /** Throws the client-facing error for a key that may not be registered under `regionName`. */
  check (regionName: string, key: string): void {
    const objectName = objectNameOf(key)
    if (isMalformed(key, objectName)) throw invalidKey(regionName, key)
    const reserved = this.#reservedPrefixes.find((prefix) => objectName.startsWith(prefix))
    if (reserved !== undefined) throw reservedKey(regionName, key, reserved)
    if (this.#allows !== undefined && !this.#allows(key)) throw invalidKey(regionName, key)
  }
}
