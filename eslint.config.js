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
    rules: {
      'no-console': 'error',
      // A Kafka client library only in its driver's folder (src/kafka/<driver>/): the rest talks to src/kafka/ports.ts.
      'no-restricted-imports': [
        'error',
        {
          paths: [
            { name: 'kafkajs', message: 'KafkaJS only in src/kafka/kafkajs/: use the ports of src/kafka/ports.ts' },
            { name: '@platformatic/kafka', message: '@platformatic/kafka only in src/kafka/platformatic/: use the ports of src/kafka/ports.ts' },
          ],
        },
      ],
    },
  },
  {
    files: ['src/kafka/kafkajs/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [{ name: '@platformatic/kafka', message: 'one driver per folder' }] }] },
  },
  {
    files: ['src/kafka/platformatic/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [{ name: 'kafkajs', message: 'one driver per folder' }] }] },
  },
  {
    // The dashboard's page scripts run in the browser, as ES modules.
    files: ['src/dashboard/assets/**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: {
        document: 'readonly',
        fetch: 'readonly',
        setTimeout: 'readonly',
        URLSearchParams: 'readonly',
        location: 'readonly',
        history: 'readonly',
        Node: 'readonly',
      },
    },
  },
  {
    files: ['bin/**/*.js', 'scripts/**/*.js', 'scripts/**/*.mjs', 'bench/**/*.mjs', 'test/**/*.mjs', '.ci/**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
);
