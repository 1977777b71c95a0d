/**
 * Seeds of randomised tests (fuzzers, property tests), so that a failure replays: `$<name>`
 * when set, else `$TEST_SEED` (npm test sets it from the commit and prints it: a rerun of a
 * commit replays its inputs, each new commit tries new ones), else one drawn now. The caller
 * prints the seed with a failure, with the variable that replays it.
 */
export function testSeed(name: string): number {
  for (const v of [process.env[name], process.env.TEST_SEED]) {
    if (v === undefined || v === '') continue;
    if (!/^\d+$/.test(v) || Number(v) >= 2 ** 31) throw new Error(`${v === process.env[name] ? name : 'TEST_SEED'}=${v}: a seed is a whole number below 2^31`);
    return Number(v);
  }
  return Math.floor(Math.random() * 2 ** 31);
}
