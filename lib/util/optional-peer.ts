/**
 * Optional peer dependencies (onnxruntime-node, better-sqlite3, grpc-js) are loaded only by the
 * feature that needs them, when first used, with an error that says what to install.
 */
import { missingPeerDependency, unusablePeerDependency } from '../errors'

/** The package's module (Node caches it after the first load). `load` is `require`, or a stand-in
 * for it. */
export function optionalPeer<Module> (name: string, feature: string, load: (name: string) => unknown = require): Module {
  try {
    return load(name) as Module
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') throw missingPeerDependency(error, feature, name)
    // Installed but unusable, e.g. a native build for another Node version.
    throw unusablePeerDependency(error, feature, name, (error as Error).message)
  }
}
