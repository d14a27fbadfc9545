// eslint.config.mjs -- the house rules a compiler does not check, checked by
// `npm run lint` (and .ci/run, after tsc). Type-aware: typescript-eslint
// reads tsconfig.json through its project service. Only rules that catch
// bugs are on; formatting is not linted.
//   switch-exhaustiveness-check  a switch over a union (message kinds, phases,
//                                resources) must name every member or end in a
//                                default; a member added later fails the lint
//   no-floating-promises         every promise is awaited, handled, or marked
//                                `void` with a comment saying why
//   no-explicit-any              outside test/, unknown data is `unknown` and
//                                is narrowed, never `any`
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '**/*.js', '**/*.mjs'] },
  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    // The code carries directives for core rules not switched on here (no-control-regex).
    linterOptions: { reportUnusedDisableDirectives: 'off' },
    rules: {
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test's test() and describe() return promises the runner awaits itself.
        { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'describe', 'it', 'suite'] }] },
      ],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
