/**
 * bench/syscalls.c, compiled with the system's `cc` into a temporary directory (removed at exit)
 * and run: the cost of a registration's system calls with no JavaScript around them.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const SOURCE = path.join(__dirname, 'syscalls.c')

export class SyscallsProgram {
  private constructor (readonly binary: string) {}

  static compile (): SyscallsProgram {
    const directory = mkdtempSync(path.join(os.tmpdir(), 'fastify-triton-shm-bench-'))
    process.on('exit', () => rmSync(directory, { recursive: true, force: true }))
    const binary = path.join(directory, 'syscalls')
    // -lrt: shm_open lives in librt on glibc before 2.34 (harmless after).
    execFileSync('cc', ['-O2', '-std=c11', '-Wall', '-Werror', '-o', binary, SOURCE, '-lrt'], { stdio: ['ignore', 'inherit', 'inherit'] })
    return new SyscallsProgram(binary)
  }

  /** Nanoseconds per shm_open + fstat + mmap + close + munmap, one value per batch. */
  run (key: string, byteSize: number, iterations: number, batches: number): number[] {
    const output = execFileSync(this.binary, [key, String(byteSize), String(iterations), String(batches)], { encoding: 'utf8', timeout: 120_000 })
    return (JSON.parse(output) as { nsPerCycle: number[] }).nsPerCycle
  }
}
