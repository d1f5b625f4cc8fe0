/**
 * The table of error codes against its documentation (docs/errors.md): every code is documented
 * once, with its kind and the status each transport answers it with, and the page lists no code
 * that does not exist; every answered kind has an HTTP status and a gRPC code.
 */
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { status } from '@grpc/grpc-js'
import t from 'tap'
import { type AnsweredKind, errorCodes, type ErrorKind, TritonError } from '../lib/errors'
import { GRPC_CODE, toServiceError } from '../lib/grpc'
import { HTTP_STATUS } from '../lib/http/http-status'
import { httpStatusOf } from '../lib/index'

const page = readFileSync(path.join(__dirname, '..', 'docs', 'errors.md'), 'utf8')

/** The rows of the page's table that start with `first`, split into cells. */
function rows (first: RegExp): string[][] {
  return page.split('\n').filter((line) => first.test(line)).map((line) => line.split(/(?<!\\)\|/).slice(1, -1).map((cell) => cell.trim()))
}

const answered = (kind: ErrorKind): kind is AnsweredKind => Object.hasOwn(HTTP_STATUS, kind)
const grpcName = (code: number) => status[code]

t.test('every code is documented once, with its kind and statuses, and nothing else is', async (t) => {
  const documented = rows(/^\| `ERR_SHM_/)
  const codes = documented.map(([code]) => code.replaceAll('`', ''))
  t.same(codes.filter((code, index) => codes.indexOf(code) !== index), [], 'no code is listed twice')
  t.same(codes.filter((code) => !Object.hasOwn(errorCodes, code)), [], 'the page lists no code that does not exist')
  t.same(Object.keys(errorCodes).filter((code) => !codes.includes(code)), [], 'every code is on the page')
  for (const [cell, kind, http, grpc] of documented) {
    const code = cell.replaceAll('`', '')
    t.equal(kind, errorCodes[code], `${code}: its kind`)
    const expected = answered(errorCodes[code]) ? [String(HTTP_STATUS[kind as AnsweredKind]), grpcName(GRPC_CODE[kind as AnsweredKind])] : ['–', '–']
    t.same([http, grpc], expected, `${code}: its HTTP status and gRPC code`)
  }
})

t.test('each code is declared once in lib/errors.ts', async (t) => {
  const source = readFileSync(path.join(__dirname, '..', 'lib', 'errors.ts'), 'utf8')
  const declared = [...source.matchAll(/\('(ERR_SHM_[A-Z_]+)'/g)].map(([, code]) => code)
  t.same(declared.filter((code, index) => declared.indexOf(code) !== index), [], 'no code is declared twice (a second would replace the first)')
  t.same(declared.sort(), Object.keys(errorCodes).sort(), 'every declaration is in the table')
})

t.test('every kind is documented, and each face maps every kind a client can be answered with', async (t) => {
  const kinds = rows(/^\| [a-z-]+ \|/).map(([kind, http, grpc]) => ({ kind, http, grpc }))
  const used = [...new Set(Object.values(errorCodes))]
  t.same(used.filter((kind) => !kinds.some((row) => row.kind === kind)), [], 'every kind in use is explained')
  for (const { kind, http, grpc } of kinds.filter((row) => answered(row.kind as ErrorKind))) {
    t.equal(http, String(HTTP_STATUS[kind as AnsweredKind]), `${kind}: HTTP`)
    t.equal(grpc, grpcName(GRPC_CODE[kind as AnsweredKind]), `${kind}: gRPC`)
  }
  t.same(Object.keys(GRPC_CODE).sort(), Object.keys(HTTP_STATUS).sort(), 'both faces map the same kinds')
})

t.test('an error of each answered kind takes its face\'s status', async (t) => {
  for (const kind of Object.keys(HTTP_STATUS) as AnsweredKind[]) {
    const error = new TritonError('ERR_SHM_TEST', kind, `a ${kind} error`)
    t.equal(httpStatusOf(error), HTTP_STATUS[kind], `${kind} over HTTP`)
    t.same(toServiceError(error), { code: GRPC_CODE[kind], details: `a ${kind} error` }, `${kind} over gRPC`)
  }
})
