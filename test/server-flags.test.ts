/**
 * The example service's reading of tritonserver's options (example/server-flags.ts), on command
 * lines as Triton's QA suites start tritonserver (test/fixtures/tritonserver-command-lines.json):
 * what each maps to, and each refusal in tritonserver's words.
 */
import { readFileSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { parseServerFlags, SERVER_FLAG_NAMES, ServerFlagError } from '../example/server-flags'

interface CommandLines {
  taken: Array<{ args: string[], flags: object }>
  refused: Array<{ args: string[], message: string }>
}

const commandLines = JSON.parse(readFileSync(path.join(__dirname, 'fixtures', 'tritonserver-command-lines.json'), 'utf8')) as CommandLines

t.test('each command line maps to the options it names, and to nothing else', async (t) => {
  for (const { args, flags } of commandLines.taken) t.strictSame(parseServerFlags(args), flags, args.join(' '))
  t.strictSame(parseServerFlags([]), { modelRepositories: [] }, 'no options: the service\'s own defaults')
})

t.test('each refusal is a ServerFlagError in tritonserver\'s words', async (t) => {
  for (const { args, message } of commandLines.refused) {
    t.throws(() => parseServerFlags(args), new ServerFlagError(message), args.join(' '))
  }
})

t.test('the options taken are the ones its documentation lists', async (t) => {
  const page = readFileSync(path.join(__dirname, '..', 'docs', 'example.md'), 'utf8')
  const documented = [...page.matchAll(/^\| `(--[a-z-]+)[=` ]/gm)].map(([, name]) => name)
  t.same([...documented].sort(), [...SERVER_FLAG_NAMES].sort(), 'docs/example.md has one row per option')
})
