/** describeStartError: errno codes the black-box tests cannot provoke as root (EROFS, EACCES). */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '@ticketing/server';
import { describeStartError } from '../src/start-errors.js';

const errno = (code: string, fields: Record<string, unknown>) => Object.assign(new Error(`${code}: raw text`), { code, ...fields });
const config = loadConfig({ 'data-dir': '/var/lib/ticketing', listen: '0.0.0.0:5225' });

describe('describeStartError', () => {
  it('a read-only data directory', () => {
    expect(describeStartError(errno('EROFS', { syscall: 'open', path: '/var/lib/ticketing/LOCK' }), config)).toBe(
      'cannot use the data directory /var/lib/ticketing (open /var/lib/ticketing/LOCK): the file system is read-only; or give another --data-dir (EROFS)',
    );
  });

  it('a data directory the user may not write', () => {
    expect(describeStartError(errno('EACCES', { syscall: 'mkdir', path: '/var/lib/ticketing' }), config)).toMatch(
      /^cannot use the data directory \/var\/lib\/ticketing: permission denied for this user \(uid \d+\): make the directory writable by it \(chown\), or run as its owner; or give another --data-dir \(EACCES\)$/,
    );
  });

  it('a privileged port', () => {
    expect(describeStartError(errno('EACCES', { syscall: 'listen', address: '0.0.0.0', port: 5225 }), config)).toBe(
      'cannot start the client listener on 0.0.0.0:5225: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE); choose a port from 1024 up with --listen (EACCES)',
    );
  });

  it('the default admin listener and peer listener are told apart from the client listener by port', () => {
    expect(describeStartError(errno('EADDRINUSE', { syscall: 'listen', address: '127.0.0.1', port: 9225 }), config)).toMatch(/^cannot start the admin listener on 127\.0\.0\.1:9225: .* --http \(EADDRINUSE\)$/);
    expect(describeStartError(errno('EADDRNOTAVAIL', { syscall: 'listen', address: '10.9.9.9', port: 5226 }), config)).toMatch(/^cannot start the peer listener on 10\.9\.9\.9:5226: this host has no such address.* --peer-listen \(EADDRNOTAVAIL\)$/);
  });

  it('anything else keeps its own message', () => {
    expect(describeStartError(new Error('boom'), config)).toBe('cannot start: boom');
  });
});
