/**
 * The ESM entry: the CommonJS build itself, re-exported. ESM and CommonJS users of one process
 * therefore share one copy of every class (a registry from either is `instanceof Registry` of
 * both), and the plugin is the default export for Node and for TypeScript's `nodenext` and
 * `bundler` resolutions alike.
 */
import { fastifyTritonShm } from './index.js'

export * from './index.js'
export default fastifyTritonShm
