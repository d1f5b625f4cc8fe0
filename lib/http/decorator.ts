/** Where the plugin decorates the Fastify instance with its registry, unless told otherwise (the
 * `decorator` option); the model endpoints find it there. */
export const DEFAULT_DECORATOR = 'systemSharedMemory'
