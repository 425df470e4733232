'use strict';
/**
 * `npm run gateway` (and the gateway `npm start` supervises): the compiled gateway, dist/app/api/main.js, with plain
 * node and no TypeScript loader in the process (tsx's loader costs RSS, start-up time and about 4% of the gateway's CPU
 * under load, source-mapping every Error stack). Rebuilt first when a source is newer (the worker's build: one
 * `tsc -p tsconfig.worker.json` emits both); tsx as a fallback without TypeScript.
 * ADCP_GATEWAY_RUNTIME=auto|compiled|tsx chooses, as ADCP_WORKER_RUNTIME does for the worker (scripts/run-compiled.cjs).
 *
 * Plain CommonJS on purpose: it must run before anything is compiled, without tsx.
 */
require('./run-compiled.cjs').runCompiled({
  name: 'gateway',
  variable: 'ADCP_GATEWAY_RUNTIME',
  compiled: 'dist/app/api/main.js',
  source: 'api/main.ts',
});
