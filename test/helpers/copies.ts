/** Counting the copies a request takes in this package's JavaScript. */

/** Counts calls of TypedArray#set (the copy every copying path of the package takes) made by
 * `action`. Node's own code keeps its own reference to it, so only this package's calls count. */
export async function countCopies<T> (action: () => Promise<T>): Promise<{ result: T, copies: number }> {
  const prototype = Object.getPrototypeOf(Uint8Array.prototype) as { set: (...args: unknown[]) => void }
  const set = prototype.set
  let copies = 0
  prototype.set = function (this: unknown, ...args: unknown[]) {
    copies++
    return set.apply(this, args)
  }
  try {
    return { result: await action(), copies }
  } finally {
    prototype.set = set
  }
}
