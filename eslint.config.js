// @ts-check
// Lint: eslint + typescript-eslint with type-aware rules (promises above all:
// a floating or misused promise in a lock server is a lost release).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: ['**/dist/**', '**/node_modules/**', 'clients/jvm/**', 'coverage/**', '**/*.d.ts', 'test-artifacts/**', 'examples/**/build/**', '**/.venv/**'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: globals.node,
      parserOptions: {
        project: ['./packages/*/tsconfig.json', './tsconfig.tests.json'],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/require-await': 'error',
      '@typescript-eslint/return-await': ['error', 'in-try-catch'],
      '@typescript-eslint/promise-function-async': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  // Plain JavaScript entry points and scripts: no type information.
  { files: ['**/*.js', '**/*.mjs', '**/*.cjs', 'packages/cli/bin/ticketing'], ...tseslint.configs.disableTypeChecked },
  // CommonJS smoke tests check that require() works: that is their point.
  { files: ['**/*.cjs'], rules: { '@typescript-eslint/no-require-imports': 'off' } },
);
