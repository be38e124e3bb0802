// The first pass of `npm test` (scripts/test.sh): every test file but the serial ones
// (test/serial-files.json), TEST_JOBS files at a time, each worker a process of its own.
// CommonJS: mocha loads its configuration files with require.
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS module, for mocha's require */
const { env } = require('node:process');
const base = require('../.mocharc.json');
const { files } = require('./serial-files.json');

module.exports = {
  ...base,
  parallel: true,
  jobs: Number(env.TEST_JOBS || 3),
  ignore: files,
};
