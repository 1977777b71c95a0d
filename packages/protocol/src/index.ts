/**
 * @ticketing/protocol: the pure codec of the Ticketing wire protocol, version 1
 * (PROTOCOL.md). Shared by the server and the TypeScript client. No sockets,
 * no timers, no dependencies beyond Node built-ins.
 */
export * from './limits.js';
export * from './errors.js';
export * from './request.js';
export * from './reply.js';
export * from './line-framer.js';
export * from './validate.js';
