/**
 * Hooks for the project's whole-node simulator (packages/sim), which runs
 * this client on simulated time over a simulated network so that its
 * Indeterminate and release rules are exercised under faults. Not part of
 * the supported API: applications never need them.
 */
export { useClock, type ClientClock } from './timing.js';
export { useTransport, type ClientSocket, type Transport } from './transport.js';
