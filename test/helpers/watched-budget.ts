/** The package's in-flight budget, remembering the most one request held: what a refused body cost. */
import { InFlightBytes, type InFlightBudget, type InFlightReservation } from '../../lib/index'

export class WatchedBudget implements InFlightBudget {
  readonly budget: InFlightBytes
  /** The most bytes one reservation held since this was last set to 0. */
  most = 0

  constructor (maxBytes: number) {
    this.budget = new InFlightBytes(maxBytes)
  }

  get maxBytes (): number {
    return this.budget.maxBytes
  }

  get heldBytes (): number {
    return this.budget.heldBytes
  }

  get peakBytes (): number {
    return this.budget.peakBytes
  }

  open (): InFlightReservation {
    const reservation = this.budget.open()
    const watch = (bytes: number) => { this.most = Math.max(this.most, bytes) }
    return {
      get bytes () { return reservation.bytes },
      charge (bytes: number) {
        reservation.charge(bytes)
        watch(reservation.bytes)
      },
      release () { reservation.release() }
    }
  }
}
