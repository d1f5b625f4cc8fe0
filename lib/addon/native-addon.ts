/**
 * The native addon (lib/native/), loaded once by Node's module cache: shared memory (shm.c) and the
 * ONNX runner (ort-session.c, ort-run.c) live in one binary, each given its typed face where it is used.
 */
import path from 'node:path'

// The package root holds binding.gyp, both from lib/addon/ (sources) and from dist/lib/addon/
// (compiled). Only a trailing dist/lib/addon counts: a checkout may itself sit inside a directory named dist.
const packageRoot = path.resolve(__dirname.replace(/[\\/]dist(?=[\\/]lib[\\/]addon$)/, ''), '../..')

/** node-gyp-build finds a prebuilt binary for this platform, or the one node-gyp built at install. */
export const nativeAddon: unknown = (require('node-gyp-build') as (root: string) => unknown)(packageRoot)
