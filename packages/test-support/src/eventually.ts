/** Waiting in tests: for a condition, or for a while. */

/**
 * Resolves once `check()` is true, polling every `everyMs`; rejects with
 * "not `what` within `ms` ms" after `ms`. `check` may be async (an HTTP probe).
 */
export async function eventually(what: string, check: () => boolean | Promise<boolean>, ms = 5_000, everyMs = 20): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`not ${what} within ${ms} ms`);
    await sleep(everyMs);
  }
}

export const sleep = async (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
