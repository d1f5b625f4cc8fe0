/**
 * With @fastify/swagger registered before the plugin, the host's OpenAPI document publishes this
 * API as docs/openapi.yaml (the API as published) describes it, under the plugin's prefix.
 */
import swagger from '@fastify/swagger'
import Fastify from 'fastify'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import fastifyTritonShm, { type FastifyTritonShmOptions } from '../lib/index'

type Json = Record<string, any>

const published = parse(readFileSync(path.join(__dirname, '../docs/openapi.yaml'), 'utf8')) as Json

async function documentOf (t: Test, options: FastifyTritonShmOptions): Promise<Json> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(swagger, { openapi: { info: { title: 'host', version: '1.0.0' } } })
  await app.register(fastifyTritonShm, options)
  await app.ready()
  return app.swagger() as Json
}

/** A schema's types and descriptions, property by property: what a reader of the document sees. */
const shapeOf = (schema: Json) => Object.fromEntries(Object.entries(schema.properties as Json)
  .map(([name, property]) => [name, { type: property.type, description: property.description }]))

t.test('every published path, under the prefix, with its operationId, tags, summary and responses', async (t) => {
  const document = await documentOf(t, { prefix: '/triton' })
  const region = published.components.schemas.SharedMemoryRegion
  const errorResponse = published.components.schemas.ErrorResponse

  for (const [route, operations] of Object.entries(published.paths as Json)) {
    const generated = document.paths[`/triton${route}`]
    t.ok(generated, `${route} is published under the prefix`)
    for (const [method, operation] of Object.entries(operations as Json)) {
      const mine = generated[method]
      t.equal(mine.operationId, operation.operationId, `${method} ${route}: operationId`)
      t.same(mine.tags, operation.tags, `${method} ${route}: tags`)
      t.equal(mine.summary, operation.summary, `${method} ${route}: summary`)
      t.equal(mine.description, operation.description, `${method} ${route}: description`)
      for (const [status, response] of Object.entries(operation.responses as Json)) {
        t.equal(mine.responses[status]?.description, response.description, `${method} ${route}: ${status} description`)
        const schema = response.content?.['application/json']?.schema
        if (schema === undefined) continue
        const generatedSchema = mine.responses[status].content['application/json'].schema
        if (schema.type === 'array') t.same(shapeOf(generatedSchema.items), shapeOf(region), `${method} ${route}: ${status} lists regions`)
        else t.same(shapeOf(generatedSchema), shapeOf(errorResponse), `${method} ${route}: ${status} is an ErrorResponse`)
      }
      if (route.includes('{region_name}')) {
        t.match(mine.parameters, [{ name: 'region_name', in: 'path', required: true, schema: { type: 'string' } }],
          `${method} ${route}: the region_name path parameter`)
      }
      const body = operation.requestBody?.content['application/json'].schema
      if (body !== undefined) {
        const generatedBody = mine.requestBody.content['application/json'].schema
        t.same(Object.keys(generatedBody.properties), Object.keys(body.properties), `${method} ${route}: body fields`)
        for (const [field, property] of Object.entries(body.properties as Json)) {
          t.match(generatedBody.properties[field], { type: property.type, description: property.description }, `${method} ${route}: ${field}`)
        }
        // 'offset' is optional (default 0), as Triton's clients rely on: the published text lists it as required.
        t.same(generatedBody.required, ['key', 'byte_size'], `${method} ${route}: key and byte_size are required`)
      }
    }
  }
})

t.test('the 405 answers and the name-less register stay out of the document', async (t) => {
  const document = await documentOf(t, {})
  t.same(Object.keys(document.paths['/v2/systemsharedmemory/status']), ['get'])
  t.notOk(document.paths['/v2/systemsharedmemory/register'], 'no name-less register')
  t.notOk(document.paths['/v2/systemsharedmemory/*'], 'no catch-all')
  t.same(document.paths['/v2/cudasharedmemory/status'].get.tags, ['CUDA Shared Memory'])
})

t.test('options hide the routes or change their tags', async (t) => {
  const hidden = await documentOf(t, { openapi: { hide: true } })
  t.same(Object.keys(hidden.paths ?? {}).filter((route) => route.includes('sharedmemory')), [], 'hidden')

  const tagged = await documentOf(t, { openapi: { systemTags: ['Inference'], cudaTags: [] } })
  t.same(tagged.paths['/v2/systemsharedmemory/status'].get.tags, ['Inference'])
  t.same(tagged.paths['/v2/cudasharedmemory/status'].get.tags, [])
})
