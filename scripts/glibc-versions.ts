/**
 * The glibc symbol versions a binary needs, read from its version-needs section with readelf
 * (which, unlike objdump, reads every architecture's ELF).
 */
import { execFileSync } from 'node:child_process'

/** Every `GLIBC_*` version the binary asks for, from any library: `2.17`, or a name like `ABI_DT_RELR`. */
export function glibcVersionsNeeded (binary: string): string[] {
  const needs = execFileSync('readelf', ['--version-info', '--wide', binary], { encoding: 'utf8' })
  const versions = new Set((needs.match(/\bGLIBC_[A-Z0-9_.]+\b/g) ?? []).map((name) => name.slice('GLIBC_'.length)))
  return [...versions].sort(compareVersions)
}

/**
 * Whether glibc `release` defines every version the binary needs. Named versions
 * (`GLIBC_ABI_DT_RELR`, `GLIBC_PRIVATE`) are newer than 2.28 or never stable: never met.
 */
export function unmetOn (release: string, versions: readonly string[]): string[] {
  return versions.filter((version) => !/^\d+(\.\d+)+$/.test(version) || compareVersions(version, release) > 0)
}

/** Numeric order of dotted versions; `2.10` comes after `2.9`. */
export function compareVersions (left: string, right: string): number {
  const leftParts = left.split('.').map(Number)
  const rightParts = right.split('.').map(Number)
  for (let index = 0; index < Math.max(leftParts.length, rightParts.length); index++) {
    const difference = (leftParts[index] || 0) - (rightParts[index] || 0)
    if (difference !== 0) return difference
  }
  return 0
}
