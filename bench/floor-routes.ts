/**
 * The infer floor's ladder (bench/infer-floor.ts, bench/infer-instructions.ts), each rung one step
 * of the package's infer path more than the last, all answering the same bytes (`answer`, the model
 * table's answer for FLOOR_MODEL):
 *   bare: Fastify parses the body as JSON (its own parser);
 *   body: the package's infer body parser (`useInferBodyParser`) instead;
 *   read: and `readInferRequest` (the request's checks, its regions found and leased);
 *   hand (HAND_INFER_ROUTE): and the model run, its outputs written, the answer built (`inferResponse`);
 * the model table's own route (`/v2/models/<m>/infer`) adds the table: version, statistics,
 * admission.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { type Model, run } from '../example/models'
import { inferResponse, kserveErrorHandler, readInferRequest, useInferBodyParser } from '../lib/index'
import { floorRoute, HAND_INFER_ROUTE } from './server-protocol'

type ModelRequest = FastifyRequest<{ Params: { model: string } }>

/** The bare, body and read rungs. */
export async function floorRoutes (app: FastifyInstance, models: Map<string, Model>, answer: () => Buffer): Promise<void> {
  const send = (reply: FastifyReply) => reply.header('content-type', 'application/json').send(answer())
  app.post(floorRoute('bare'), (_request, reply) => { send(reply) })
  await app.register(async (scope) => {
    useInferBodyParser(scope, { bodyLimit: 1024 ** 3 })
    scope.setErrorHandler(kserveErrorHandler)
    scope.post(floorRoute('body'), (_request, reply) => { send(reply) })
    scope.post(floorRoute('read'), (request: ModelRequest, reply: FastifyReply) => {
      const { signature } = models.get(request.params.model) as Model
      // Ended before the answer is sent, as `inferResponse` ends it.
      readInferRequest(request, reply, { registry: app.systemSharedMemory, model: signature, modelVersion: signature.versions?.[0] }).release()
      send(reply)
    })
  })
}

/** The model table's infer route without the table (the hand rung, and the model table suite's
 * baseline): the same path parameter, reading, run and response. */
export async function handInferRoute (app: FastifyInstance, models: Map<string, Model>): Promise<void> {
  await app.register(async (hand) => {
    useInferBodyParser(hand, { bodyLimit: 1024 ** 3 })
    hand.setErrorHandler(kserveErrorHandler)
    hand.post(HAND_INFER_ROUTE, async (request: ModelRequest, reply: FastifyReply) => {
      const model = models.get(request.params.model)
      if (model === undefined) return reply.code(404).send({ error: 'unknown model' })
      // The version the table would name: the example's models have one.
      const infer = readInferRequest(request, reply, { registry: app.systemSharedMemory, model: model.signature, modelVersion: model.signature.versions?.[0] })
      await run(model, infer, 0)
      return inferResponse(infer, reply)
    })
  })
}
