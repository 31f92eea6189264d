// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'packages/*/dist/', 'node_modules/', 'data/', '.infra/', 'coverage/', 'test/artifacts/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: { 'no-console': 'error' },
  },
  {
    // The dashboard's page script runs in the browser.
    files: ['src/dashboard/assets/**/*.js'],
    languageOptions: { sourceType: 'script', globals: { document: 'readonly', fetch: 'readonly', setTimeout: 'readonly' } },
  },
  {
    files: ['bin/**/*.js', 'scripts/**/*.js', 'scripts/**/*.mjs', 'bench/**/*.mjs', 'test/**/*.mjs', '.ci/**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
);
