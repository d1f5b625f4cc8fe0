/**
 * Stops under load, for the soak and fuzz suites: several Fastify apps sharing one registry (as the
 * processes of a service do, here in one process), inferences held in flight over a shared memory
 * region, then every app closed while they run. What must hold: each inference in flight is
 * answered 200 with its result, and afterwards nothing is left, neither beside the store (its lease
 * table) nor mapped from /dev/shm, whatever the order of the closes and of the inferences' ends.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import fastifyTritonShm, { inferResponse, readInferRequest, useInferBodyParser } from '../../lib/index'
import { registerBody, SYSTEM } from './app'
import { infer, shmInput, sumModel } from './kserve'
import { mappingsOf } from './shm'
import { Gate } from './sync'

export interface StopScenario {
  /** Apps sharing the registry (1 or more). */
  apps: number
  /** Inferences in flight when the closes begin, spread over the apps in turn. */
  inFlight: number
  /** The order in which the apps are closed (a permutation of their indexes). */
  closeOrder: number[]
  /** The region is unregistered while the inferences hold it (deferred). */
  unregisterFirst: boolean
  /** The inferences go on after this many closes have begun (0 to `apps`). */
  releaseAfter: number
}

const model = sumModel('simple')
/** INPUT0 = 0..15 and INPUT1 = 1s, as the region `in` holds them. */
const INPUTS = [0, 64].map((offset, index) => shmInput(`INPUT${index}`, 'INT32', [1, 16], 'in', 64, offset))
const SUMS = Array.from({ length: 16 }, (_, index) => index + 1)

async function sharingApp (store: string, gate: Gate): Promise<FastifyInstance> {
  const app = Fastify()
  await app.register(fastifyTritonShm, { sharedRegistry: { path: store, checkIntervalMs: 50 } })
  await app.register(async (inference) => {
    useInferBodyParser(inference)
    inference.post('/v2/models/simple/infer', async (request, reply) => {
      const inferRequest = readInferRequest(request, reply, { registry: app.systemSharedMemory, model: model.signature })
      await gate.pass()
      await model.execute(inferRequest)
      return inferResponse(inferRequest, reply)
    })
  })
  await app.ready()
  return app
}

/** Runs one scenario over the client's object `inputKey` (32 INT32: 0..15, then 1s). Returns what went wrong. */
export async function stopUnderLoad (scenario: StopScenario, inputKey: string): Promise<string[]> {
  const problems: string[] = []
  const directory = mkdtempSync(path.join(tmpdir(), 'fts-stops-'))
  const store = path.join(directory, 'registry.db')
  const gate = new Gate(false)
  const apps: FastifyInstance[] = []
  try {
    for (let index = 0; index < scenario.apps; index++) apps.push(await sharingApp(store, gate))
    const registered = await apps[0].inject({ method: 'POST', url: `${SYSTEM}/region/in/register`, payload: registerBody(inputKey, 128) })
    if (registered.statusCode !== 200) problems.push(`register answered ${registered.statusCode} ${registered.body}`)
    const answers = Array.from({ length: scenario.inFlight }, (_, index) => infer(apps[index % apps.length], 'simple', { inputs: INPUTS }))
    await gate.untilHeld(scenario.inFlight, `${scenario.inFlight} inferences in flight`)
    if (scenario.unregisterFirst) {
      const unregistered = await apps[apps.length - 1].inject({ method: 'POST', url: `${SYSTEM}/region/in/unregister` })
      if (unregistered.statusCode !== 200) problems.push(`unregister answered ${unregistered.statusCode}`)
    }
    const closes: Array<Promise<void>> = []
    for (const [step, index] of scenario.closeOrder.entries()) {
      if (step === scenario.releaseAfter) gate.open()
      closes.push(apps[index].close())
    }
    gate.open()
    for (const [index, answer] of (await Promise.all(answers)).entries()) {
      const sums = answer.statusCode === 200 ? JSON.parse(answer.body).outputs[0].data : undefined
      if (JSON.stringify(sums) !== JSON.stringify(SUMS)) problems.push(`inference ${index}: ${answer.statusCode} ${answer.body}`)
    }
    await Promise.all(closes)
    const left = readdirSync(directory).filter((name) => name !== 'registry.db')
    if (left.length > 0) problems.push(`left beside the store: ${left.join(', ')}`)
    // The client's own mapping is the only one.
    if (mappingsOf(inputKey).length !== 1) problems.push(`${mappingsOf(inputKey).length - 1} server mappings of the region left`)
  } finally {
    gate.open()
    await Promise.all(apps.map((app) => app.close()))
    rmSync(directory, { recursive: true, force: true })
  }
  return problems
}
