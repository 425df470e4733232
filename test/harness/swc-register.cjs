'use strict';
/**
 * A require hook for tests that spawn the project's TypeScript entry points many times (`node -r
 * ./test/harness/swc-register.cjs cli/main.ts ...`): each .ts file is compiled to CommonJS by SWC with the options
 * Jest uses (jest.config.js), and the result kept in a cache under the system's temporary directory, keyed by path,
 * size and modification time. The sources run unchanged, as under tsx, without tsx's loader process and source-map
 * work on every start (about half the start-up time of a short command on 2 cores).
 */
const { createHash } = require('node:crypto');
const { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const CACHE = path.join(os.tmpdir(), 'adcp-swc-register-cache');
const OPTIONS = {
  jsc: { target: 'es2022', parser: { syntax: 'typescript' } },
  module: { type: 'commonjs' },
  sourceMaps: 'inline',
};
let swc;

function compile(filename) {
  const stat = statSync(filename);
  const key = createHash('sha256').update(`${filename}\0${stat.size}\0${stat.mtimeMs}`).digest('hex');
  const cached = path.join(CACHE, `${key}.js`);
  try {
    return readFileSync(cached, 'utf8');
  } catch {
    /* not compiled yet */
  }
  swc ??= require('@swc/core');
  const { code } = swc.transformSync(readFileSync(filename, 'utf8'), { ...OPTIONS, filename });
  mkdirSync(CACHE, { recursive: true });
  // Written aside and renamed, so a process starting at the same moment never reads half a file.
  const partial = `${cached}.${process.pid}.tmp`;
  writeFileSync(partial, code);
  renameSync(partial, cached);
  return code;
}

require.extensions['.ts'] = (module, filename) => {
  module._compile(compile(filename), filename);
};
