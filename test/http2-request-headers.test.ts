/**
 * A request's header list checked as RFC 9113 §8.2–8.3 has it: what passes becomes node:http2's
 * object (a repeated name's values joined), every malformed list says why.
 */
import t from 'tap'
import { requestHeaders } from '../lib/http2/request-headers'

const request = [':method', 'POST', ':scheme', 'http', ':path', '/inference.GRPCInferenceService/ModelInfer', ':authority', 'localhost']

t.test('a valid request: pseudo-header fields first, repeated names joined, any name a field', async (t) => {
  const headers = requestHeaders([...request, 'content-type', 'application/grpc', 'te', 'trailers', 'x-key', 'a', 'x-key', 'b', 'constructor', 'c', 'x-empty', ''])
  t.same({ ...headers as object }, {
    ':method': 'POST',
    ':scheme': 'http',
    ':path': '/inference.GRPCInferenceService/ModelInfer',
    ':authority': 'localhost',
    'content-type': 'application/grpc',
    te: 'trailers',
    'x-key': 'a, b',
    constructor: 'c',
    'x-empty': ''
  })
  t.same({ ...requestHeaders([':method', 'GET', ':scheme', 'https', ':path', '/']) as object }, { ':method': 'GET', ':scheme': 'https', ':path': '/' }, ':authority is optional')
})

t.test('every malformed list says why', async (t) => {
  const cases: Array<[string[], string]> = [
    [[...request, 'Content-Type', 'x'], 'field name "Content-Type" is not a lower-case token'],
    [[...request, '', 'x'], 'field name "" is not a lower-case token'],
    [[...request, 'x key', 'x'], 'field name "x key" is not a lower-case token'],
    [[...request, 'x', 'a\nb'], 'field x\'s value has NUL, CR, LF or whitespace at an end'],
    [[...request, 'x', 'a\0b'], 'field x\'s value has NUL, CR, LF or whitespace at an end'],
    [[...request, 'x', ' a'], 'field x\'s value has NUL, CR, LF or whitespace at an end'],
    [[...request, 'x', 'a\t'], 'field x\'s value has NUL, CR, LF or whitespace at an end'],
    [['x', 'a', ...request], 'pseudo-header field :method after a regular field'],
    [[...request, ':status', '200'], 'unknown pseudo-header field :status'],
    [[...request, ':path', '/'], 'pseudo-header field :path repeated'],
    [[...request, 'connection', 'keep-alive'], 'connection-specific field connection'],
    [[...request, 'transfer-encoding', 'chunked'], 'connection-specific field transfer-encoding'],
    [[...request, 'te', 'gzip'], 'te other than "trailers"'],
    [[':method', 'POST', ':scheme', 'http'], 'request without :method, :scheme or :path'],
    [[':method', 'POST', ':path', '/'], 'request without :method, :scheme or :path'],
    [[':scheme', 'http', ':path', '/'], 'request without :method, :scheme or :path'],
    [[':method', 'POST', ':scheme', 'http', ':path', ''], 'request without :method, :scheme or :path']
  ]
  for (const [fields, reason] of cases) t.equal(requestHeaders(fields), reason, reason)
})
