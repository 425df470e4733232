/** Layers (docs/testing.md): unit (no server), workflow (time-skipping server, activity stand-ins), integration (real servers and sellers). */
const swc = { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } };
const os = require('node:os');

const transform = { '^.+\\.(t|j|mj)sx?$': ['@swc/jest', swc] };
// Node 20 loads ESM-only dependencies (jose, used by @adcp/sdk) through require(esm); Jest's module runtime
// cannot, so those few packages are compiled to CommonJS for tests.
const transformIgnorePatterns = ['/node_modules/(?!(jose)/)'];
const common = {
  // With ADCP_TEST_CPU_FILE set, each file's CPU is written down (test/harness/cpu-environment.cjs, docs/testing.md).
  testEnvironment: process.env.ADCP_TEST_CPU_FILE ? '<rootDir>/test/harness/cpu-environment.cjs' : 'node',
  transform,
  transformIgnorePatterns,
  moduleFileExtensions: ['ts', 'js', 'mjs', 'json'],
};

module.exports = {
  testTimeout: 120_000,
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    // Workflow wiring on the time-skipping server, with small activity stand-ins on a real worker: seconds per file.
    { ...common, displayName: 'workflow', testMatch: ['<rootDir>/test/workflow/**/*.test.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/harness/global-setup.ts',
      globalTeardown: '<rootDir>/test/harness/global-teardown.ts',
    },
  ],
  // Two files per core: an integration file spends most of its wall time waiting on timers, sellers and Temporal
  // (convergence.test.ts alone uses 0.45 of a core), so on 2 cores two workers left the machine about 40% idle and four
  // keep it 93% busy (docs/testing.md). Capped at one worker per 3 GiB of memory; `--maxWorkers` on the command line
  // still wins.
  maxWorkers: Math.max(1, Math.min(os.availableParallelism() * 2, Math.floor(os.totalmem() / 3 / 2 ** 30))),
  // The longest files start first, from Jest's cache of earlier runs or, in a clean clone, a list of known durations.
  testSequencer: '<rootDir>/test/harness/sequencer.cjs',
  // A worker that ran ~30 integration files holds a 1.5-2.7 GB heap (each file's module graph, Temporal bundles);
  // tearing that down took longer than the 500 ms Jest allows a worker to exit after its last file ("A worker process
  // has failed to exit gracefully": the event loop was already empty, 'exit' had fired). A worker past this much heap
  // after a file is replaced, so none ends the run that large.
  workerIdleMemoryLimit: '768MB',
};
