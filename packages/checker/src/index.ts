/**
 * @ticketing/checker: a linearizability checker for Ticketing lock histories
 * (Wing-Gong/Lowe search, partitioned per key), a recorder that builds such
 * histories from raw protocol clients, and the `ticketing verify` workload.
 */
export * from './history.js';
export * from './verdict.js';
export { check, DEFAULT_SLACK_MS, type CheckOptions } from './check.js';
export { describeOperation, formatVerdict, summarizeOutcomes, verdictLine } from './report.js';
export { HistoryRecorder, RecordingClient, type RecorderOptions } from './recorder.js';
export type { ConnectOptions } from './connection.js';
export { runWorkload, type WorkloadOptions, type WorkloadResult } from './workload.js';
export { seededRandom } from './random.js';
