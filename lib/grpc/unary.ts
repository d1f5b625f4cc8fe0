/** A grpc-js unary handler from a function that answers synchronously: its throw becomes the status. */
import type { sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js'
import { type ErrorLogger, toServiceError } from './status'

export function unary<Request, Response> (answer: (call: ServerUnaryCall<Request, Response>) => Response, log?: ErrorLogger) {
  return (call: ServerUnaryCall<Request, Response>, callback: sendUnaryData<Response>) => {
    let response: Response
    try {
      response = answer(call)
    } catch (error) {
      return callback(toServiceError(error, log))
    }
    callback(null, response)
  }
}
