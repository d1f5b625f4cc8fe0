/**
 * Property-based fuzzing of the HTTP API with fast-check: random methods, paths, names, bodies and
 * content types against a real Fastify instance and real shared memory. Whatever arrives:
 * no 5xx, every error of these routes is exactly {"error": string}, a refused request changes
 * nothing, and the process ends with no extra mapping or file descriptor.
 */
import fc from 'fast-check'
import t from 'tap'
import { buildApp, CUDA, SYSTEM } from './helpers/app'
import { makeObject, openFdCount, PAGE_SIZE, shmMappings } from './helpers/shm'

const RUNS = 10_000
const OBJECT_BYTES = 4 * PAGE_SIZE

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH'] as const

const CONTENT_TYPES = [undefined, 'application/json', 'text/plain', 'application/octet-stream',
  'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16', '*/*', ';;']

/** Numbers that have broken implementations of this API: signs, overflow, precision, non-integers. */
const interestingNumber = fc.oneof(
  fc.constantFrom(0, -0, 1, -1, 0.5, 1e308, -1e308, 2 ** 31, 2 ** 32, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, 2 ** 63, 2 ** 64,
    PAGE_SIZE - 1, PAGE_SIZE, PAGE_SIZE + 1, OBJECT_BYTES - 1, OBJECT_BYTES, OBJECT_BYTES + 1),
  fc.integer({ min: 0, max: OBJECT_BYTES * 2 }),
  fc.double()
)

/** Region names: empty, huge, NUL, unicode, slashes, percent signs, plus signs. */
const regionName = fc.oneof(
  fc.constantFrom('', 'a', 'region', 'a/b', '..', '%', '+', ' ', '\0', 'é', '🙂', 'x'.repeat(99), 'x'.repeat(500)),
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 })
)

function keyArbitrary (keys: string[]) {
  return fc.oneof(
    fc.constantFrom(...keys),
    fc.constantFrom('', '/', '//', '/..', '/.', '/a/b', '/a\0b', '/triton_python_backend_shm_region_1', '/' + 'k'.repeat(300),
      '/does_not_exist', 'relative', '///' + keys[0].slice(1)),
    fc.string({ maxLength: 30 })
  )
}

const deepNesting = fc.integer({ min: 1, max: 5000 }).map((depth) => '['.repeat(depth) + ']'.repeat(depth))

function bodyArbitrary (keys: string[]) {
  const field = fc.oneof(interestingNumber, fc.string({ maxLength: 5 }), fc.constant(null), fc.boolean(), fc.constant([]), fc.constant({}))
  const registerObject = fc.record({
    key: fc.oneof(keyArbitrary(keys), field),
    offset: fc.oneof(interestingNumber, field),
    byte_size: fc.oneof(interestingNumber, field)
  }, { requiredKeys: [] })
  return fc.oneof(
    fc.constant(undefined),
    registerObject.map((body) => JSON.stringify(body)),
    fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
    fc.string({ maxLength: 40 }),
    fc.constantFrom('{', '{"key":', 'null', '[]', '"string"', '{"key":"/k","byte_size":1e999}', '\u0000', '{"__proto__":{"x":1}}'),
    deepNesting,
    fc.constant('x'.repeat(70 * 1024))
  )
}

function pathArbitrary () {
  const name = regionName.map(encodeURIComponent)
  const base = fc.constantFrom(SYSTEM, CUDA)
  return fc.oneof(
    fc.tuple(base, name, fc.constantFrom('status', 'register', 'unregister', 'other')).map(([b, n, action]) => `${b}/region/${n}/${action}`),
    fc.tuple(base, fc.constantFrom('status', 'register', 'unregister', 'region', 'other', '')).map(([b, action]) => `${b}/${action}`),
    fc.tuple(base, fc.string({ maxLength: 20 }).map(encodeURIComponent)).map(([b, rest]) => `${b}/${rest}`)
  )
}

t.test(`${RUNS} random requests: no 5xx, {"error"} bodies, refused requests change nothing, no leaks`, async (t) => {
  const keys = [makeObject(t, OBJECT_BYTES, 'fuzz_a'), makeObject(t, OBJECT_BYTES, 'fuzz_b'), makeObject(t, PAGE_SIZE, 'fuzz_c')]
  const app = await buildApp(t, { limits: { maxRegions: 8 } })
  const fdsBefore = openFdCount()
  const mappingsBefore = shmMappings().length
  let successes = 0

  await fc.assert(fc.asyncProperty(
    fc.constantFrom(...METHODS), pathArbitrary(), bodyArbitrary(keys), fc.constantFrom(...CONTENT_TYPES),
    async (method, url, body, contentType) => {
      const before = JSON.stringify(app.systemSharedMemory.status())
      const headers = contentType === undefined ? {} : { 'content-type': contentType }
      const withBody = method !== 'GET' && method !== 'HEAD' && body !== undefined
      const response = await app.inject({ method, url, headers, payload: withBody ? body : undefined })

      if (response.statusCode >= 500) throw new Error(`${method} ${url} answered ${response.statusCode}: ${response.body}`)
      if (response.statusCode < 400) {
        successes++
        return
      }
      // A path with dot segments may normalize to one outside the API, which the host answers.
      const reachesApi = /^\/v2\/(system|cuda)sharedmemory\//.test(new URL(url, 'http://host').pathname)
      if (method !== 'HEAD' && reachesApi) {
        const parsed = JSON.parse(response.body) as Record<string, unknown>
        if (Object.keys(parsed).length !== 1 || typeof parsed.error !== 'string') {
          throw new Error(`${method} ${url} answered ${response.statusCode} with ${response.body}`)
        }
        if (parsed.error.includes('/dev/shm')) throw new Error(`an error names a file-system path: ${parsed.error}`)
      }
      if (JSON.stringify(app.systemSharedMemory.status()) !== before) throw new Error(`refused ${method} ${url} changed the registry`)
    }
  ), { numRuns: RUNS })

  t.ok(successes > 0, `some requests succeeded (${successes}), so the fuzzer reaches the success paths too`)
  app.systemSharedMemory.unregisterAll()
  t.equal(openFdCount(), fdsBefore, 'no file descriptor leaked')
  t.equal(shmMappings().length, mappingsBefore, 'no mapping leaked')
})
