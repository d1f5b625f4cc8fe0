/**
 * The child of bench/infer-instructions.ts: the example service with the infer floor's ladder
 * (bench/floor-routes.ts), `simple_js`'s regions registered, and one rung requested through
 * `app.inject` (no sockets: what is counted is the process's own work). It warms the rung up
 * (V8 is still optimizing the path after 1,500 requests, and all but done after 4,500), serves
 * `INJECT_REQUESTS` more requests, and collects their garbage, so that two runs differing only in
 * that count differ by those requests' whole cost. No collection between the warm-up and the
 * requests counted: a full one there lets the maps the warm-up's code was compiled for die, V8
 * throws that code away (its `weak objects` deoptimizations), and the counted requests would pay
 * for compiling it again (a third to a half of their instructions).
 *   INJECT_RUNG=bare|body|read|hand|table INJECT_WARM=5000 INJECT_REQUESTS=4000 node --expose-gc ...
 */
import { buildServer } from '../example/server'
import { type Model, sumAndDifference } from '../example/models'
import { floorRoutes, handInferRoute } from './floor-routes'
import { FLOOR_MODEL, FLOOR_STEPS, floorPath, type FloorStep } from './server-protocol'
import { jsonRegion, SimpleShm } from './simple-shm'

/** The ladder's steps but `traced`: tracing writes a file, where this counts the process's work. */
export type InjectRung = Exclude<FloorStep, 'traced'>
export const INJECT_RUNGS = FLOOR_STEPS.filter((step): step is InjectRung => step !== 'traced')

async function main () {
  const rung = process.env.INJECT_RUNG as InjectRung
  if (!INJECT_RUNGS.includes(rung)) throw new Error(`INJECT_RUNG must be one of ${INJECT_RUNGS.join(', ')}`)
  const collect = (globalThis as { gc?: () => void }).gc
  if (collect === undefined) throw new Error('run with --expose-gc')
  const models = new Map<string, Model>([[FLOOR_MODEL, sumAndDifference(FLOOR_MODEL, 'INT32', [-1, 16], 8)]])
  const app = await buildServer({ models, fastify: { logger: false } })
  let answer: Buffer = Buffer.alloc(0)
  await handInferRoute(app, models)
  await floorRoutes(app, models, () => answer)
  const simple = new SimpleShm(`inject${process.pid}`)
  try {
    for (const [name, object] of [[simple.regions.in, simple.input], [simple.regions.out, simple.output]] as const) {
      const registered = await app.inject({ method: 'POST', url: `/v2/systemsharedmemory/region/${name}/register`, payload: { key: object.key, offset: 0, byte_size: object.byteSize } })
      if (registered.statusCode !== 200) throw new Error(`register: ${registered.body}`)
    }
    const request = { method: 'POST' as const, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(simple.wire(jsonRegion)) }
    const table = await app.inject({ ...request, url: floorPath('table') })
    if (table.statusCode !== 200 || !simple.answered()) throw new Error(`the table answers ${table.body}`)
    answer = table.rawPayload
    const serve = async (count: number) => {
      for (let index = 0; index < count; index++) {
        const served = await app.inject({ ...request, url: floorPath(rung) })
        if (served.statusCode !== 200 || served.body !== table.body) throw new Error(`${rung} answers ${served.statusCode} ${served.body}`)
      }
    }
    await serve(Number(process.env.INJECT_WARM ?? 5000))
    await serve(Number(process.env.INJECT_REQUESTS ?? 4000))
    collect()
  } finally {
    await app.close()
    simple.dispose()
  }
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error)
    process.exit(1)
  })
}
