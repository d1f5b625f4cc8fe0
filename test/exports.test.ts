/**
 * The package's entry names every KServe helper one by one (Node's ESM import of the CommonJS
 * build only sees names it can read there): none may be left out when lib/kserve grows.
 * test/package.test.ts proves the names reach ESM users of the packed tarball.
 */
import t from 'tap'
import * as entry from '../lib/index'
import * as kserve from '../lib/index'
import * as models from '../lib/index'

t.test('every KServe helper is a named export of the package', async (t) => {
  t.ok(Object.keys(kserve).length > 0)
  t.same(Object.keys(kserve).filter((name) => !(name in entry)), [], 'none missing')
})

t.test('every model table name is a named export of the package', async (t) => {
  t.ok(Object.keys(models).length > 0)
  t.same(Object.keys(models).filter((name) => !(name in entry)), [], 'none missing')
})
