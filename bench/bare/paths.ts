import path from 'node:path';

/** The bare baseline's workflow file, bundled by the bench for bench/worker.ts (kind "bare"). */
export const BARE_WORKFLOWS_PATH = path.join(__dirname, 'workflow.ts');
