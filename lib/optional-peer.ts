/**
 * Optional peer dependencies (onnxruntime-node, better-sqlite3) are loaded only by the feature that
 * needs them, when first used, with an error that says what to install.
 */

/** The package's module (Node caches it after the first load). `load` is `require`, or a stand-in
 * for it. */
export function optionalPeer<Module> (name: string, feature: string, load: (name: string) => unknown = require): Module {
  try {
    return load(name) as Module
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') {
      throw new Error(`${feature} needs the package '${name}': npm install ${name}`, { cause: error })
    }
    // Installed but unusable, e.g. a native build for another Node version.
    throw new Error(`${feature} could not load the package '${name}': ${(error as Error).message}`, { cause: error })
  }
}
