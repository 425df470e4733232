/**
 * The bare baseline's workflow file, bundled by the bench for bench/worker.ts (kind "bare"). Resolved, not spelled
 * with an extension: workflow.ts under tsx, workflow.js in the compiled bench worker (dist/app/bench/).
 */
export const BARE_WORKFLOWS_PATH = require.resolve('./workflow');
