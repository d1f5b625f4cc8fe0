/**
 * A request's header list as RFC 9113 §8.2–8.3 has it, checked once decoded: names in lower case,
 * pseudo-header fields first, each once and known, the ones a request needs present, no
 * connection-specific field, values without NUL, CR, LF or whitespace at either end. A list that
 * fails is a malformed request, refused with its stream (PROTOCOL_ERROR). What passes is an object
 * as node:http2 gives one: a name repeated has its values joined with ", ".
 */

export type RequestHeaders = Record<string, string>

const PSEUDO_HEADERS = new Set([':method', ':scheme', ':authority', ':path'])
const CONNECTION_SPECIFIC = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade'])
/** A token's characters (RFC 9110 §5.6.2), upper case aside. */
const NAME = /^:?[a-z0-9!#$%&'*+\-.^_`|~]+$/
const VALUE = /^(?:[^\0\r\n\t ](?:[^\0\r\n]*[^\0\r\n\t ])?)?$/

/** The request's headers, or why the list is malformed. */
export function requestHeaders (fields: readonly string[]): RequestHeaders | string {
  // Without a prototype: a field named "constructor" is a field like any other.
  const headers: RequestHeaders = Object.create(null)
  let regular = false
  for (let index = 0; index < fields.length; index += 2) {
    const name = fields[index]
    const value = fields[index + 1]
    if (!NAME.test(name)) return `field name ${JSON.stringify(name)} is not a lower-case token`
    if (!VALUE.test(value)) return `field ${name}'s value has NUL, CR, LF or whitespace at an end`
    if (name[0] === ':') {
      if (regular) return `pseudo-header field ${name} after a regular field`
      if (!PSEUDO_HEADERS.has(name)) return `unknown pseudo-header field ${name}`
      if (name in headers) return `pseudo-header field ${name} repeated`
      headers[name] = value
      continue
    }
    regular = true
    if (CONNECTION_SPECIFIC.has(name)) return `connection-specific field ${name}`
    if (name === 'te' && value !== 'trailers') return 'te other than "trailers"'
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value
  }
  if (headers[':method'] === undefined || headers[':scheme'] === undefined || !headers[':path']) return 'request without :method, :scheme or :path'
  return headers
}
