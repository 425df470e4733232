'use strict';
/**
 * `npm run worker` (and the worker `npm start` supervises): the compiled worker, dist/app/workers/main.js, with plain
 * node and no TypeScript loader in the process (tsx's loader costs about 35 MiB of RSS; bench/README.md, run G).
 * Rebuilt first when a source is newer; tsx as a fallback without TypeScript. ADCP_WORKER_RUNTIME=auto|compiled|tsx
 * chooses (scripts/run-compiled.cjs, shared with the gateway).
 *
 * Plain CommonJS on purpose: it must run before anything is compiled, without tsx.
 */
require('./run-compiled.cjs').runCompiled({
  name: 'worker',
  variable: 'ADCP_WORKER_RUNTIME',
  compiled: 'dist/app/workers/main.js',
  source: 'workers/main.ts',
});
