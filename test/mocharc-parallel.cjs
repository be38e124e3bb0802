// The first pass of `npm test` (scripts/test.sh): every test file but the serial ones
// (test/serial-files.json), TEST_JOBS files at a time, each worker a process of its own, the
// longest files first (serial-files.json's `longFirst`), then the others in path order.
// CommonJS: mocha loads its configuration files with require.
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS module, for mocha's require */
const { globSync } = require('node:fs');
const { env } = require('node:process');
const base = require('../.mocharc.json');
const { files: serial, longFirst } = require('./serial-files.json');

const all = globSync(base.spec).sort();
const parallel = all.filter((file) => !serial.includes(file));
const first = longFirst.files.filter((file) => parallel.includes(file));

module.exports = {
  ...base,
  spec: [...first, ...parallel.filter((file) => !first.includes(file))],
  parallel: true,
  jobs: Number(env.TEST_JOBS || 3),
};
