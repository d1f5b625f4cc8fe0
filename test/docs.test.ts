/**
 * The documentation holds together: the README stays a front page (at most 400 lines, with the two
 * commands a fresh clone runs), every relative link of the README, CONTRIBUTING.md, SECURITY.md,
 * CHANGELOG.md and docs/*.md points at a file of the repository that exists (and, with an anchor
 * into a Markdown page, at one of its headings), and every page of docs/ is linked from the
 * README's index and links back to it, and the README's options tables list every option the two
 * plugins take, and no other.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { modelsOptionsSchema } from '../lib/http/models-options'
import { pluginOptionsSchema } from '../lib/plugin-options'

const root = path.join(__dirname, '..')
const MAX_README_LINES = 400

const read = (page: string) => readFileSync(path.join(root, page), 'utf8')

const docsPages = readdirSync(path.join(root, 'docs')).filter((file) => file.endsWith('.md')).map((file) => `docs/${file}`)
const pages = ['README.md', 'CONTRIBUTING.md', 'SECURITY.md', 'CHANGELOG.md', ...docsPages]

/** The page's lines with fenced code blocks blanked out (lines keep their numbers). */
function outsideFences (markdown: string): string[] {
  let fence: string | undefined
  return markdown.split('\n').map((line) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1]
    if (fence !== undefined) {
      if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length) fence = undefined
      return ''
    }
    if (marker !== undefined) {
      fence = marker
      return ''
    }
    return line
  })
}

/** The page's prose: code blocks and inline code spans blanked out, so a link written as an
 * example (a `[x](y)` inside code) is not taken for one. */
const prose = (markdown: string): string[] => outsideFences(markdown).map((line) => line.replace(/(`+)[^`]*?\1/g, ''))

interface Link { line: number, target: string }

/** Every link and image target of the page: inline `[text](target "title")` and reference
 * definitions `[label]: target`. */
function linksOf (markdown: string): Link[] {
  const links: Link[] = []
  prose(markdown).forEach((text, index) => {
    for (const [, target] of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ line: index + 1, target })
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(text)
    if (definition !== null) links.push({ line: index + 1, target: definition[1] })
  })
  return links
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')

/** The anchor GitHub gives a heading: lower case, punctuation dropped, each space a hyphen. */
function slugOf (heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** The anchors of a Markdown page's headings (code spans read as their text); a repeated heading
 * gets GitHub's `-1`, `-2`... */
function anchorsOf (markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const line of outsideFences(markdown)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1]
    if (heading === undefined) continue
    const slug = slugOf(heading.replace(/(`+)([^`]*?)\1/g, '$2'))
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

const anchorsOfFile = (file: string): Set<string> => anchorsOf(readFileSync(file, 'utf8'))

/** What is wrong with a relative link of `page`, or undefined if it holds. */
function brokenLink (page: string, target: string): string | undefined {
  const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined]
  const file = pathPart === '' ? path.join(root, page) : path.resolve(path.dirname(path.join(root, page)), decodeURIComponent(pathPart))
  const relative = path.relative(root, file)
  if (relative.startsWith('..') || path.isAbsolute(relative)) return 'points outside the repository'
  if (!existsSync(file)) return `${relative} does not exist`
  if (anchor === undefined || anchor === '' || !file.endsWith('.md') || statSync(file).isDirectory()) return undefined
  return anchorsOfFile(file).has(anchor) ? undefined : `${relative} has no heading #${anchor}`
}

t.test('the README is a front page: at most 400 lines, with the two commands a fresh clone runs', async (t) => {
  const readme = read('README.md')
  const lines = readme.split('\n').length - (readme.endsWith('\n') ? 1 : 0)
  t.ok(lines <= MAX_README_LINES, `README.md has ${lines} lines (at most ${MAX_README_LINES}): move the rest to docs/`)
  t.ok(readme.includes('npm ci && npm run example'), 'README.md shows `npm ci && npm run example`')
  t.ok(/(^|[^\w-])npm test([^\w-]|$)/m.test(readme), 'README.md shows `npm test`')
})

t.test('every relative link of the documentation points at a file (and heading) that exists', async (t) => {
  for (const page of pages) {
    const relative = linksOf(read(page)).filter(({ target }) => !isExternal(target))
    const broken = relative.flatMap(({ line, target }) => {
      const problem = brokenLink(page, target)
      return problem === undefined ? [] : [`${page}:${line}: (${target}) ${problem}`]
    })
    t.same(broken, [], `${page}: ${relative.length} relative links, none broken`)
  }
})

t.test('every page of docs/ is in the README\'s index, and links back to the README', async (t) => {
  const linked = new Set(linksOf(read('README.md')).map(({ target }) => target.split('#')[0]))
  const published = readdirSync(path.join(root, 'docs')).filter((file) => /\.(md|yaml)$/.test(file)).map((file) => `docs/${file}`)
  t.same(published.filter((page) => !linked.has(page)), [], 'the README links every page of docs/')
  for (const page of docsPages) {
    t.ok(linksOf(read(page)).some(({ target }) => target.split('#')[0] === '../README.md'), `${page} links back to the README`)
  }
})

t.test('the link checker itself: code is no link, anchors follow GitHub\'s headings', async (t) => {
  t.same(linksOf('a [page](docs/x.md#y) and ![img](p.png "t")\n`[not](a link)`\n```\n[nor](this)\n```\n[ref]: other.md\n')
    .map(({ target }) => target), ['docs/x.md#y', 'p.png', 'other.md'])
  t.same([...anchorsOf('# Why not @fastify/sensible\n## `kserveModels` options\n## A, b\n## A, b\n```\n# not\n```\n')],
    ['why-not-fastifysensible', 'kservemodels-options', 'a-b', 'a-b-1'])
  t.equal(brokenLink('README.md', '../outside.md'), 'points outside the repository')
  t.equal(brokenLink('README.md', 'docs/nowhere.md'), path.join('docs', 'nowhere.md') + ' does not exist')
  t.match(brokenLink('README.md', 'SECURITY.md#nowhere'), /has no heading #nowhere/)
  t.equal(brokenLink('README.md', '#license'), undefined)
})

interface OptionSchema { properties?: Record<string, OptionSchema>, [keyword: string]: unknown }

/** Every option a schema takes, nested ones by their dotted path (`limits.maxRegions`), each
 * object with properties also by its own name. */
function optionPaths (schema: OptionSchema, parent = ''): string[] {
  return Object.entries(schema.properties ?? {}).flatMap(([name, property]) => {
    const option = parent === '' ? name : `${parent}.${name}`
    return [option, ...optionPaths(property, option)]
  })
}

/** The options a README table under `heading` names: the code spans of its rows' first cells
 * (`beforeRun(request, infer)` is `beforeRun`). */
function documentedOptions (markdown: string, heading: string): string[] {
  const lines = markdown.split('\n')
  if (!lines.includes(heading)) throw new Error(`no heading ${heading}`)
  const after = lines.slice(lines.indexOf(heading) + 1)
  const first = after.findIndex((line) => line.startsWith('|'))
  const end = after.findIndex((line, index) => index > first && !line.startsWith('|'))
  const rows = after.slice(first + 2, end) // after the header and its delimiter row
  return rows.flatMap((row) => [...row.split('|')[1].matchAll(/`([^`]+)`/g)].map(([, name]) => name.replace(/\(.*\)$/, '')))
}

/** What the table misses of the schema (an option neither listed nor under a listed one), and what it lists that the schema does not take. */
function optionsDrift (schema: OptionSchema, documented: string[]) {
  const options = optionPaths(schema)
  const covered = (option: string) => documented.some((name) => option === name || option.startsWith(`${name}.`))
  const leaves = options.filter((option) => !options.some((other) => other.startsWith(`${option}.`)))
  return { missing: leaves.filter((option) => !covered(option)), unknown: documented.filter((name) => !options.includes(name)) }
}

t.test('the README\'s options tables list every option of the plugin and of kserveModels, and no other', async (t) => {
  const readme = read('README.md')
  const plugin = documentedOptions(readme, '### Plugin options')
  const models = documentedOptions(readme, '### `kserveModels` options')
  t.ok(plugin.length > 10 && models.length > 10, 'both tables are found')
  t.throws(() => documentedOptions(readme, '### Another heading'), /no heading/, 'a heading that is gone fails the test')
  t.same(optionsDrift(pluginOptionsSchema, plugin), { missing: [], unknown: [] }, 'the plugin\'s options')
  t.same(optionsDrift(modelsOptionsSchema, models), { missing: [], unknown: [] }, 'kserveModels\' options')
  t.same(optionsDrift({ properties: { a: {}, b: { properties: { c: {}, d: {} } } } }, ['a', 'b.c', 'e']), { missing: ['b.d'], unknown: ['e'] },
    'the check itself: a nested option missed, an option that does not exist')
})
