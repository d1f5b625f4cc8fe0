import t from 'tap'
import { buildApp, registerBody, SYSTEM } from './helpers/app'
import { makeObject } from './helpers/shm'

t.test('register and list a region', async (t) => {
  const app = await buildApp(t)
  const key = makeObject(t, 4096)
  const res = await app.inject({ method: 'POST', url: `${SYSTEM}/region/r/register`, payload: registerBody(key, 64) })
  t.equal(res.statusCode, 200)
  t.same(app.systemSharedMemory.status(), [{ name: 'r', key, offset: 0, byte_size: 64 }])
})
