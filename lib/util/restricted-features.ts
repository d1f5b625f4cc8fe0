/**
 * Triton's restricted features (`--http-restricted-api`, `--grpc-restricted-protocol`): the
 * endpoints come in categories, and each restricted category is served only to calls that carry
 * its group's header (gRPC: metadata key) with its group's value. One instance per face and
 * transport, as Triton keeps one table per front end: the HTTP face answers 403 `This API is
 * restricted, ...`, the gRPC face UNAVAILABLE `This protocol is restricted, ...`.
 */
import type { RestrictedCategory, RestrictionGroup } from '../../types'
import * as errors from '../errors'
import { carriesSecret } from './constant-time'

/** RFC 9110 token: the characters a header name (or gRPC metadata key) may hold. */
export const HEADER_NAME = '^[!#$%&\'*+.^_`|~0-9A-Za-z-]+$'

/** Every category, in Triton's order (src/restricted_features.h). */
export const RESTRICTED_CATEGORIES: readonly RestrictedCategory[] = [
  'health', 'metadata', 'inference', 'shared-memory', 'model-config', 'model-repository', 'statistics', 'trace', 'logging'
]

/** The schema of an option that takes restriction groups. Categories are checked by
 * `RestrictedFeatures`, in Triton's words. */
export const restrictionGroupsSchema = {
  type: 'array',
  items: {
    type: 'object',
    additionalProperties: false,
    required: ['categories', 'header', 'value'],
    properties: {
      categories: { type: 'array', minItems: 1, items: { type: 'string' } },
      header: { type: 'string', pattern: HEADER_NAME },
      value: { type: 'string' }
    }
  }
} as const

/** The transport whose words a refusal takes. */
export type RestrictedTransport = 'http' | 'grpc'

interface Restriction { header: string, lowerCaseHeader: string, expected: Buffer }

export class RestrictedFeatures {
  readonly #transport: RestrictedTransport
  readonly #byCategory = new Map<string, Restriction>()

  /**
   * The restrictions of `groups`; throws, with Triton's texts (after `owner`, the option's
   * owner), for a category Triton does not have or one named in two groups.
   */
  constructor (groups: readonly RestrictionGroup[], transport: RestrictedTransport, owner: string) {
    this.#transport = transport
    const feature = transport === 'grpc' ? 'protocol' : 'api'
    for (const { categories, header, value } of groups) {
      const restriction = { header, lowerCaseHeader: header.toLowerCase(), expected: Buffer.from(value) }
      for (const category of categories) {
        if (!RESTRICTED_CATEGORIES.includes(category)) throw errors.unknownRestrictedCategory(owner, feature, category)
        if (this.#byCategory.has(category)) throw errors.repeatedRestrictedCategory(owner, feature, category)
        this.#byCategory.set(category, restriction)
      }
    }
  }

  isRestricted (category: RestrictedCategory): boolean {
    return this.#byCategory.has(category)
  }

  /** Throws the transport's refusal unless `category` is open or the call carries its header
   * (`headerOf` is given the name in lower case, as both transports keep them). */
  check (category: RestrictedCategory, headerOf: (lowerCaseName: string) => string | undefined): void {
    const restriction = this.#byCategory.get(category)
    if (restriction === undefined || carriesSecret(headerOf(restriction.lowerCaseHeader), restriction.expected)) return
    throw this.#transport === 'grpc' ? errors.restrictedProtocol(restriction.header) : errors.restrictedApi(restriction.header)
  }
}

/** `groups`, and the older `restrictedApi` option as the group of the `shared-memory` category it is. */
export function restrictionGroups (groups: readonly RestrictionGroup[] = [], restrictedApi?: { header: string, value: string }): RestrictionGroup[] {
  return restrictedApi === undefined ? [...groups] : [...groups, { categories: ['shared-memory'], ...restrictedApi }]
}
