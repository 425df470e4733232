// Lint rules from CONVENTIONS.md: workflow files import no Node builtins and no activity code at runtime,
// and no promise may float (a forgotten await on an activity or a timer is a silent bug).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const ALLOWED_NODE_BUILTINS = new Set(['assert']);
const forbiddenInWorkflows = builtinModules
  .filter((m) => !ALLOWED_NODE_BUILTINS.has(m))
  .flatMap((m) => [m, `node:${m}`]);
/** What code that runs in the workflow sandbox must not import. */
const sandboxPaths = [
  ...forbiddenInWorkflows.map((name) => ({ name, message: 'Workflow code must not import Node builtins.' })),
  { name: '@adcp/sdk', message: 'Protocol calls belong in activities; workflows may only `import type`.' },
  { name: '@temporalio/client', message: 'Workflows use @temporalio/workflow, not the client.' },
  { name: '@temporalio/activity', message: 'Workflows must not import activity code.' },
];

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      '.temporal/',
      '.data/',
      'tmp/',
      'coverage/',
      '**/dist/',
      '**/*.js',
      '**/*.mjs',
      '**/*.cjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Node 20 keeps every AbortSignal.any() that has a listener for ever (activities/linked-signal.ts says why).
    files: ['activities/**/*.ts', 'api/**/*.ts', 'client/**/*.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        {
          object: 'AbortSignal',
          property: 'any',
          message: 'Use linkSignals/anySignal from activities/linked-signal.ts.',
        },
        {
          object: 'AbortSignal',
          property: 'timeout',
          message: 'Use deadlineSignal from activities/linked-signal.ts and dispose it when the work ends.',
        },
      ],
    },
  },
  {
    // Tests read JSON answers whose shape is the thing under test.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // observability/workflow-log-attributes.ts is a workflow interceptor module: it runs in the workflow sandbox.
    files: ['workflows/**/*.ts', 'observability/workflow-log-attributes.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: sandboxPaths,
          patterns: [
            {
              group: ['../activities', '../activities/*', '../../activities', '../../activities/*'],
              allowTypeImports: true,
              message: 'Use `import type` for activities.',
            },
          ],
        },
      ],
    },
  },
  {
    // The contract sits below workflows and activities (workflows import it, so it runs in the sandbox too): it
    // imports neither of them, not even their types.
    files: ['contract/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: sandboxPaths,
          patterns: [
            {
              group: ['../activities', '../activities/*', '../workflows', '../workflows/*'],
              message: 'contract/ is imported by workflows and activities; it imports neither.',
            },
          ],
        },
      ],
    },
  },
);
