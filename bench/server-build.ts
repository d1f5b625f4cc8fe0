/**
 * The bench server compiled to plain JavaScript, so that it runs on plain `node` as a production
 * server does. Not under tsx: tsx compiles each module through esbuild's synchronous API, whose
 * worker messages detach ArrayBuffers in the main thread, and V8 answers the first detach in a
 * process by making every typed-array loop slower from then on (its ArrayBufferDetaching
 * protector): a tsx-run server would measure tsx, not this package.
 *
 * Compiled with the project's TypeScript, without type checking (`npx tsc --noEmit -p .` does
 * that), into a temporary directory removed at exit, which links the project's node_modules and
 * native addon build.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const ROOT = path.join(__dirname, '..')

/** Compiles `entry` (a path in `root`, a checkout of this package: this one by default) and what
 * it imports; returns the path of the compiled entry. */
export function buildServer (entry = 'bench/server.ts', root = ROOT): string {
  const directory = mkdtempSync(path.join(os.tmpdir(), 'fastify-triton-shm-bench-server-'))
  process.on('exit', () => rmSync(directory, { recursive: true, force: true }))
  execFileSync(process.execPath, [
    require.resolve('typescript/bin/tsc'), path.join(root, entry),
    '--outDir', directory, '--rootDir', root, '--noCheck',
    '--module', 'node16', '--moduleResolution', 'node16', '--target', 'ES2022',
    '--esModuleInterop', '--resolveJsonModule', '--skipLibCheck', '--types', 'node'
  ], { stdio: ['ignore', 'inherit', 'inherit'], timeout: 120_000 })
  // Dependencies resolve from this project; the addon is found where lib/native-addon looks: <root>/build.
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(directory, 'node_modules'), 'dir')
  symlinkSync(path.join(root, 'build'), path.join(directory, 'build'), 'dir')
  // The gRPC protocol is read where lib/grpc looks from a checkout: <root>/proto.
  symlinkSync(path.join(root, 'proto'), path.join(directory, 'proto'), 'dir')
  // The example's ONNX graphs are read beside its compiled models.
  const graphs = path.join(root, 'example', 'onnx')
  mkdirSync(path.join(directory, 'example', 'onnx'), { recursive: true })
  for (const file of readdirSync(graphs).filter((name) => name.endsWith('.onnx'))) {
    copyFileSync(path.join(graphs, file), path.join(directory, 'example', 'onnx', file))
  }
  return path.join(directory, entry.replace(/\.ts$/, '.js'))
}
