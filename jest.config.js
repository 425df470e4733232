/** Three layers (see CONVENTIONS.md): unit (no server), temporal (real Temporal servers), e2e (real sellers). */
const swc = { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } };
const transform = { '^.+\\.(t|j|mj)sx?$': ['@swc/jest', swc] };
// Node 20 loads ESM-only dependencies (jose, used by @adcp/sdk) through require(esm); Jest's module runtime
// cannot, so those few packages are compiled to CommonJS for tests.
const transformIgnorePatterns = ['/node_modules/(?!(jose)/)'];
const common = {
  testEnvironment: 'node',
  transform,
  transformIgnorePatterns,
  moduleFileExtensions: ['ts', 'js', 'mjs', 'json'],
};

module.exports = {
  testTimeout: 120_000,
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/test/unit/**/*.test.ts'] },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
      globalSetup: '<rootDir>/test/harness/global-setup.ts',
      globalTeardown: '<rootDir>/test/harness/global-teardown.ts',
    },
  ],
  maxWorkers: 2,
};
