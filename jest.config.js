/** Three layers (see CONVENTIONS.md): unit (no server), temporal (real Temporal servers), e2e (real sellers). */
const transform = { '^.+\\.tsx?$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } } }] };
const common = { testEnvironment: 'node', transform, moduleFileExtensions: ['ts', 'js', 'json'] };

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
