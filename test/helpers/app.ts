/** A real Fastify instance with the plugin, closed when the test ends. */
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { Test } from 'tap'
import fastifyTritonShm, { type FastifyTritonShmOptions } from '../../lib/index'

export async function buildApp (t: Test, options: FastifyTritonShmOptions = {},
  serverOptions: FastifyServerOptions = {}): Promise<FastifyInstance> {
  const app = Fastify(serverOptions)
  t.teardown(() => app.close())
  await app.register(fastifyTritonShm, options)
  await app.ready()
  return app
}

export const SYSTEM = '/v2/systemsharedmemory'
export const CUDA = '/v2/cudasharedmemory'

/** The JSON body of a register request, as Triton's clients send it (no Content-Type). */
export const registerBody = (key: string, byteSize: number, offset = 0) =>
  JSON.stringify({ key, offset, byte_size: byteSize })
