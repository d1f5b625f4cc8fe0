/**
 * Checks that need something a contributor's machine may lack (a cross toolchain, qemu): there
 * they SKIP, saying what is missing and how to install it; in CI (CI=true), which installs it all,
 * its absence is a failure.
 */
import type { Test } from 'tap'
import { inCI } from '../../scripts/toolchains'

export function cannotCheckHere (t: Test, check: string, missing: string): void {
  if (inCI()) t.fail(`${check}: cannot be checked in CI, where it must be: ${missing}`)
  else t.pass(check, { skip: `cannot be checked here: ${missing}` })
}
