/** docs/client-errors.md and the error classes must list the same codes. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as client from '../../packages/client/src/index.js';

const doc = readFileSync(new URL('../../docs/client-errors.md', import.meta.url), 'utf8');
/** Rows of the table: [code, class]. */
const rows = [...doc.matchAll(/^\| `([A-Z_]+)` \| `(\w+)` \|/gm)].map((m) => [m[1]!, m[2]!] as const);

/** Every exported error class, constructed with throw-away arguments, by its code. */
function exportedCodes(): Map<string, string> {
  const codes = new Map<string, string>();
  for (const [name, value] of Object.entries(client)) {
    if (typeof value !== 'function' || !(value.prototype instanceof client.TicketingError)) continue;
    const instance = new (value as new (...args: unknown[]) => client.TicketingError)('k', 1n, 0, 0);
    codes.set(instance.code, name);
  }
  return codes;
}

describe('error codes', () => {
  it('documents every code exactly once, in the order of ERROR_CODES', () => {
    expect(rows.map(([code]) => code)).toEqual([...client.ERROR_CODES]);
  });

  it('has one exported class per code, named as the doc says', () => {
    const codes = exportedCodes();
    expect([...codes.keys()].sort()).toEqual([...client.ERROR_CODES].sort());
    for (const [code, className] of rows) expect(codes.get(code)).toBe(className);
  });

  it('gives errors their class name and a cause', () => {
    const cause = new Error('socket reset');
    const err = new client.IndeterminateError('k', 'lost', { cause });
    expect(err.name).toBe('IndeterminateError');
    expect(err.cause).toBe(cause);
    expect(err).toBeInstanceOf(client.TicketingError);
  });
});
