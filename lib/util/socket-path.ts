/** Linux's `sun_path` is 108 bytes, its NUL included: Node cuts a longer path short, silently. */
export const MAX_SOCKET_PATH_BYTES = 107

/** Whether `path` fits a Unix domain socket's address whole. */
export const fitsSocketAddress = (path: string): boolean => Buffer.byteLength(path) <= MAX_SOCKET_PATH_BYTES
