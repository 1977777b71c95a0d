/**
 * @ticketing/client: the TypeScript client of the Ticketing lock server.
 * Zero third-party runtime dependencies. See docs/client.md.
 */
export { TicketBroker, type BrokerEvents, type BrokerState } from './broker.js';
export type { ConnectionState } from './pool.js';
export { Ticket, type ReleaseResult } from './ticket.js';
export type { AcquireOptions, BrokerOptions, TlsOption } from './options.js';
export * from './errors.js';
