// The second pass of `npm test` (scripts/test.sh): the files of test/serial-files.json, one after
// another in one process, with nothing else of the suite running beside them.
// CommonJS: mocha loads its configuration files with require.
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS module, for mocha's require */
const base = require('../.mocharc.json');
const { files } = require('./serial-files.json');

module.exports = { ...base, spec: files };
