/**
 * In every test file: property tests (fast-check) run from a known seed, so a failure replays.
 * fast-check prints the seed with a counterexample; FC_SEED=<seed> (or npm test's TEST_SEED,
 * from the commit) runs the same inputs again.
 */
import fc from 'fast-check';
import { testSeed } from '@ticketing/test-support';

fc.configureGlobal({ seed: testSeed('FC_SEED') });
