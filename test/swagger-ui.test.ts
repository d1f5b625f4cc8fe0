/**
 * The example service's /documentation as a person sees it: Swagger UI, rendered by a real headless
 * Chromium from the document @fastify/swagger builds, lists the operations docs/openapi.yaml
 * publishes, by operationId.
 */
import { readFileSync } from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import { DOCUMENTATION_PREFIX } from '../example/documentation'
import { buildServer } from '../example/server'
import { INSTALL_HINT, runHeadlessChromium } from '../scripts/headless-chromium'
import { cannotCheckHere } from './helpers/ci'
import { findOnPath } from './helpers/toolchain-free'

type Operations = Record<string, { operationId: string }>

const published = parse(readFileSync(path.join(__dirname, '../docs/openapi.yaml'), 'utf8')) as { paths: Record<string, Operations> }
/** `METHOD path operationId`, for each operation the API publishes. */
const publishedOperations = Object.entries(published.paths).flatMap(([route, operations]) =>
  Object.entries(operations).map(([method, { operationId }]) => `${method.toUpperCase()} ${route} ${operationId}`))

const chromium = findOnPath('chromium')

/** `METHOD path operationId` for each operation the page shows, in page order: the operationId is
 * shown only with `displayOperationId`. */
const shownOperations = (dom: string) =>
  [...dom.matchAll(/<span class="opblock-summary-method">(\w+)<\/span>.*?data-path="([^"]*)".*?<span class="opblock-summary-operation-id">([^<]*)<\/span>/g)]
    .map(([, method, route, operationId]) => `${method} ${route} ${operationId}`)

async function rendersPublishedOperations (t: Test, executable: string): Promise<void> {
  t.equal(publishedOperations.length, 4, 'the published API has four operations')
  const app = await buildServer({ documentation: true, fastify: { logger: false } })
  t.teardown(() => app.close())
  const baseUrl = await app.listen({ host: '127.0.0.1', port: 0 })

  const dom = await runHeadlessChromium({ executable, url: `${baseUrl}${DOCUMENTATION_PREFIX}`, action: ['--dump-dom'] })
  const shown = shownOperations(dom)
  for (const operation of publishedOperations) t.ok(shown.includes(operation), `on the page: ${operation}`, { shown })
}

const RENDERED = 'Swagger UI at /documentation shows the published operations by operationId'
if (chromium === undefined) cannotCheckHere(t, RENDERED, `chromium is not installed, so the page cannot be rendered: ${INSTALL_HINT}`)
else t.test(RENDERED, (t) => rendersPublishedOperations(t, chromium))

t.test('the documentation is served only when asked for', async (t) => {
  const app = await buildServer({ fastify: { logger: false } })
  t.teardown(() => app.close())
  const response = await app.inject({ url: DOCUMENTATION_PREFIX })
  t.equal(response.statusCode, 404)
})
