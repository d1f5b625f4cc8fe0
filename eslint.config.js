'use strict'

module.exports = require('neostandard')({
  ts: true,
  ignores: ['dist/**', 'build/**', 'coverage/**', '.tap/**']
})
