/** Server errors carry a stable code and their cause, and are logged with their stack. */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import * as errors from '../src/errors.js';
import { SecretSet } from '../src/secret-set.js';

describe('server errors', () => {
  it('every ServerError class has its own code from SERVER_ERROR_CODES, its name, and keeps its cause', () => {
    type Concrete = new (message: string, options?: { cause?: unknown }) => errors.ServerError;
    const classes = (Object.values(errors) as unknown[]).filter(
      (v): v is Concrete & { name: string } => typeof v === 'function' && (v as { prototype: unknown }).prototype instanceof errors.ServerError,
    );
    const cause = new Error('underneath');
    const codes = classes.map((C) => {
      const e = new C('boom', { cause });
      expect(e.name).toBe(C.name);
      expect(e.cause).toBe(cause);
      return e.code;
    });
    expect([...codes].sort()).toEqual([...errors.SERVER_ERROR_CODES].sort());
  });

  it('is logged under pino’s err key with its code and stack', () => {
    let out = '';
    const sink = new Writable({ write: (chunk: Buffer, _e, done) => ((out += chunk.toString()), done()) });
    pino(sink).error({ err: new errors.CorruptStorage('bad checksum') }, 'stopping');
    const line = JSON.parse(out) as { err: { type: string; code: string; message: string; stack: string } };
    expect(line.err).toMatchObject({ type: 'CorruptStorage', code: 'STORAGE_CORRUPT', message: 'bad checksum' });
    expect(line.err.stack).toContain('errors.test.ts');
  });
});

describe('SecretSet', () => {
  it('matches exactly the configured secrets, and none when empty', () => {
    const s = new SecretSet(['alpha', 'beta']);
    expect(s.matches('alpha') && s.matches('beta')).toBe(true);
    expect(s.matches('alph') || s.matches('alphaa') || s.matches('')).toBe(false);
    s.replace([]);
    expect(s.count).toBe(0);
    expect(s.matches('alpha')).toBe(false);
  });
});
