import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    // test/long: minutes of real-process runs, a step of their own in npm test (TICKETING_LONG_TESTS=1 runs them).
    exclude: [...configDefaults.exclude, ...(process.env.TICKETING_LONG_TESTS === '1' ? [] : ['test/long/**'])],
    globalSetup: ['./vitest.global-setup.ts'],
    setupFiles: ['./vitest.setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
