/**
 * ONNX Runtime's shared library, opened by the addon's runner (lib/native/ort-session.c) with dlopen
 * when first needed: the one the installed onnxruntime-node ships, or one the host names. The
 * library runs in this process with its full rights, so only a path the host chose is ever opened.
 */
import path from 'node:path'
import { nativeAddon } from '../addon/native-addon'
import * as errors from '../errors'
import { optionalPeer } from '../util/optional-peer'

/** One input or output of a graph, as the addon describes it. */
export interface OrtValueInfo {
  name: string
  /** false for sequences, maps and other values that are not tensors. */
  tensor: boolean
  /** The ONNX element type (TensorProto.DataType); 0 where the value is not a tensor. */
  type: number
  /** Sizes, or the names of symbolic dimensions; -1 for a dimension of unknown size and no name. */
  shape: Array<number | string>
}

export interface OrtRuntimeHandle { readonly version: string, readonly apiVersion: number }
export interface OrtSessionHandle { readonly inputs: OrtValueInfo[], readonly outputs: OrtValueInfo[] }
/** An output ORT allocated itself: an ArrayBuffer over its memory, freed when collected. */
export interface OrtAllocatedOutput { data: ArrayBuffer, shape: number[] }
export interface OrtRunHandle { readonly done: Promise<Array<OrtAllocatedOutput | null>> }

/** The session options the addon reads; each an integer (see `OnnxSessionOptions`). */
export interface OrtSessionConfig {
  intraOpThreads: number
  interOpThreads: number
  graphOptimizationLevel: number
  logSeverityLevel: number
}

interface OrtAddon {
  ortLoad(libraryPath: string): OrtRuntimeHandle
  ortSession(runtime: OrtRuntimeHandle, model: string | Uint8Array, options: OrtSessionConfig): Promise<OrtSessionHandle>
  ortRun(session: OrtSessionHandle, inputIndices: number[], inputBytes: Uint8Array[], inputShapes: number[][],
    outputIndices: number[], outputBytes: Array<Uint8Array | null>, outputShapes: Array<number[] | null>): OrtRunHandle
  ortTerminate(run: OrtRunHandle): void
  ortRelease(session: OrtSessionHandle): void
}

export const ortAddon = nativeAddon as OrtAddon

const FEATURE = 'fastify-triton-shm/onnxruntime'

/** The libonnxruntime that the installed onnxruntime-node ships for this machine; throws, saying
 * what to install, where it is not installed. `resolve` is `require.resolve`, or a stand-in. */
export function bundledLibrary (resolve: (name: string) => string = require.resolve): string {
  const manifest = optionalPeer<string>('onnxruntime-node', FEATURE, (name) => resolve(`${name}/package.json`))
  return path.join(path.dirname(manifest), 'bin/napi-v6', process.platform, process.arch, 'libonnxruntime.so.1')
}

/** Whether a library of version `version` ("1.30.0") serves the API version the runner asks for:
 * API version N came with ONNX Runtime 1.N. */
export function servesApi (version: string, apiVersion: number): boolean {
  const [major, minor] = version.split('.').map(Number)
  return major > 1 || (major === 1 && minor >= apiVersion)
}

/**
 * ONNX Runtime's Linux builds start a telemetry uploader when the process's first ORT environment
 * is made: it writes a device id and a queue of events under ~/.cache/Microsoft, and a debug log and
 * a session file in TMPDIR, before any call could turn it off. Only this variable, read then,
 * prevents all of it; it is set whatever the host's environment says (the addon then also turns
 * the events of sessions and runs off through the C API).
 */
const TELEMETRY_SWITCH = 'ORT_DISABLE_TELEMETRY'

/** Opens the library, with its telemetry off; the error says which library could not serve and why. */
export function loadRuntime (libraryPath: string): OrtRuntimeHandle {
  let runtime: OrtRuntimeHandle
  process.env[TELEMETRY_SWITCH] = '1'
  try {
    runtime = ortAddon.ortLoad(libraryPath)
  } catch (error) {
    throw errors.onnxRuntimeLoadFailed(error, libraryPath, (error as Error).message)
  }
  return checkServes(runtime, libraryPath)
}

/** The runtime, if its version serves the API version the runner asked for; else throws. */
export function checkServes (runtime: OrtRuntimeHandle, libraryPath: string): OrtRuntimeHandle {
  if (!servesApi(runtime.version, runtime.apiVersion)) {
    throw errors.onnxRuntimeTooOld(undefined, libraryPath, `1.${runtime.apiVersion}`, runtime.version)
  }
  return runtime
}
