/**
 * `npm run docs:screenshot`: docs/swagger-ui.png, the example service's /documentation as headless
 * Chromium renders it (CHROMIUM names the browser; `chromium` on PATH by default).
 */
import path from 'node:path'
import { DOCUMENTATION_PREFIX } from '../example/documentation'
import { buildServer } from '../example/server'
import { runHeadlessChromium } from './headless-chromium'

const SCREENSHOT = path.join(__dirname, '../docs/swagger-ui.png')

async function main () {
  const app = await buildServer({ documentation: true, fastify: { logger: false } })
  try {
    const baseUrl = await app.listen({ host: '127.0.0.1', port: 0 })
    await runHeadlessChromium({
      executable: process.env.CHROMIUM ?? 'chromium',
      url: `${baseUrl}${DOCUMENTATION_PREFIX}`,
      action: [`--screenshot=${SCREENSHOT}`, '--window-size=1280,1400']
    })
    console.log(`wrote ${path.relative(process.cwd(), SCREENSHOT)}`)
  } finally {
    await app.close()
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
