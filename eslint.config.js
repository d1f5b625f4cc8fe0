'use strict'

const neostandard = require('neostandard')

module.exports = [
  ...neostandard({
    ts: true,
    ignores: ['dist/**', 'build/**', 'coverage/**', '.tap/**']
  }),
  {
    // V8 allocates a function literal assigned to a property in the old generation, to make it a
    // constant property. One made per request (a stream's handler) then keeps everything it
    // captures alive through every young-generation collection until a full one: that garbage is
    // copied and promoted, and V8 starts allocating the request's other objects old too
    // (docs/performance.md, "Garbage collection"). A function made per request is first a local.
    files: ['lib/**/*.ts', 'example/**/*.ts'],
    rules: {
      'no-restricted-syntax': ['error', {
        selector: "AssignmentExpression[left.type='MemberExpression'] > :matches(ArrowFunctionExpression, FunctionExpression).right",
        message: 'V8 tenures a function literal assigned to a property: name it in a local first (eslint.config.js says why).'
      }]
    }
  }
]
