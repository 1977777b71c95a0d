import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  LineFramer,
  MAX_TOKEN,
  WireError,
  formatReply,
  formatRequest,
  parseReply,
  parseReplyLine,
  parseRequest,
  parseRequestLine,
  keyError,
  type Reply,
  type Request,
} from '../src/index.js';
import { loadVectors } from './vectors.js';

const vectors = loadVectors();

describe('shared wire vectors', () => {
  it('has vectors for both directions', () => {
    expect(vectors.filter((v) => v.dir === 'req').length).toBeGreaterThan(40);
    expect(vectors.filter((v) => v.dir === 'rep').length).toBeGreaterThan(30);
  });

  for (const v of vectors) {
    it(`${v.dir} line ${v.lineNo}: ${JSON.stringify(v.source)} -> ${v.expected.ok ? 'ok' : v.expected.code}`, () => {
      const parsed = v.dir === 'req' ? parseRequest(v.bytes, 0, v.bytes.length) : parseReply(v.bytes, 0, v.bytes.length);
      if (v.expected.ok) {
        expect(parsed).not.toBeInstanceOf(WireError);
        const formatted = v.dir === 'req' ? formatRequest(parsed as Request) : formatReply(parsed as Reply);
        expect(Buffer.from(formatted, 'utf8')).toEqual(Buffer.concat([v.bytes, Buffer.from('\n')]));
      } else {
        expect(parsed).toBeInstanceOf(WireError);
        expect((parsed as WireError).code).toBe(v.expected.code);
      }
    });
  }
});

describe('request parsing', () => {
  it('reads every token of 1 to 21 digits exactly as BigInt does, and refuses 0 and above 2^64-1', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[1-9][0-9]{0,20}$/), (digits) => {
        const value = BigInt(digits);
        const reply = parseRequestLine(`R k ${digits}`);
        if (value > MAX_TOKEN) expect(reply).toEqual(new WireError('range', 'token must be 1..18446744073709551615'));
        else expect(reply).toEqual({ op: 'R', key: 'k', token: value });
      }),
      { seed: 31, numRuns: 5_000 },
    );
    for (const digits of ['9999999999999999', '10000000000000000', '999999999999999999', '18446744073709551616', '99999999999999999999']) {
      const value = BigInt(digits);
      expect(parseRequestLine(`X k ${digits} 10`)).toEqual(value > MAX_TOKEN ? new WireError('range', 'token must be 1..18446744073709551615') : { op: 'X', key: 'k', token: value, leaseSeconds: 10 });
    }
  });

  it('parses each request into its fields', () => {
    expect(parseRequestLine('A orders/42 5 30')).toEqual({ op: 'A', key: 'orders/42', waitSeconds: 5, leaseSeconds: 30 });
    expect(parseRequestLine('R orders/42 18446744073709551615')).toEqual({ op: 'R', key: 'orders/42', token: MAX_TOKEN });
    expect(parseRequestLine('R k 9007199254740993')).toEqual({ op: 'R', key: 'k', token: 9007199254740993n });
    expect(parseRequestLine('P')).toEqual({ op: 'P' });
    expect(parseRequestLine('H 1')).toEqual({ op: 'H', version: 1, clientToken: undefined });
    expect(parseRequestLine('H 1 tok')).toEqual({ op: 'H', version: 1, clientToken: 'tok' });
  });

  it('keeps a leading BOM in a key', () => {
    const r = parseRequestLine('A \uFEFFk 1 1') as Request;
    expect(r).toMatchObject({ op: 'A', key: '\uFEFFk' });
  });

  it('answers the spec example "A bad key 5 30" with "expected 4 fields"', () => {
    const e = parseRequestLine('A bad key 5 30') as WireError;
    expect(e.code).toBe('proto');
    expect(e.text).toBe('expected 4 fields');
  });

  it('never throws on arbitrary bytes and always returns a request or an error', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
        const buf = Buffer.from(bytes);
        const r = parseRequest(buf, 0, buf.length);
        expect(r instanceof WireError || ['A', 'R', 'P', 'H'].includes(r.op)).toBe(true);
      }),
      { numRuns: 20_000 },
    );
  });

  const keyArb = fc
    .string({ unit: 'grapheme', minLength: 1, maxLength: 60 })
    .filter((k) => keyError(k) === undefined);
  const requestArb: fc.Arbitrary<Request> = fc.oneof(
    fc.record({ op: fc.constant('A' as const), key: keyArb, waitSeconds: fc.integer({ min: 0, max: 255 }), leaseSeconds: fc.integer({ min: 1, max: 250 }) }),
    fc.record({ op: fc.constant('R' as const), key: keyArb, token: fc.bigInt({ min: 1n, max: MAX_TOKEN }) }),
    fc.constant({ op: 'P' as const }),
    fc.record({ op: fc.constant('H' as const), version: fc.constant(1 as const), clientToken: fc.option(keyArb, { nil: undefined }) }),
  );

  it('parses what it formats (random valid requests)', () => {
    fc.assert(
      fc.property(requestArb, (req) => {
        const line = formatRequest(req);
        expect(parseRequestLine(line.slice(0, -1))).toEqual(req);
      }),
      { numRuns: 5_000 },
    );
  });

  it('rejects every mutation that inserts a space, control byte or DEL into a valid request', () => {
    fc.assert(
      fc.property(requestArb.filter((r) => r.op !== 'P'), fc.nat(), fc.constantFrom(0x20, 0x00, 0x09, 0x0d, 0x7f), (req, at, byte) => {
        const line = Buffer.from(formatRequest(req).slice(0, -1));
        const pos = at % (line.length + 1);
        const mutated = Buffer.concat([line.subarray(0, pos), Buffer.from([byte]), line.subarray(pos)]);
        const r = parseRequest(mutated, 0, mutated.length);
        // A space may split a field into a valid shape only for H's optional token.
        if (!(r instanceof WireError)) expect(byte === 0x20 && req.op === 'H').toBe(true);
      }),
      { numRuns: 5_000 },
    );
  });
});

describe('reply parsing', () => {
  it('parses each reply into its fields', () => {
    expect(parseReplyLine('A 1764501234000001 orders/42')).toEqual({ op: 'A', token: 1764501234000001n, key: 'orders/42' });
    expect(parseReplyLine('M -')).toEqual({ op: 'M', address: undefined });
    expect(parseReplyLine('M 10.0.0.2:5225')).toEqual({ op: 'M', address: '10.0.0.2:5225' });
    expect(parseReplyLine('E proto expected 4 fields')).toEqual({ op: 'E', code: 'proto', text: 'expected 4 fields' });
    expect(parseReplyLine('H 1 n1')).toEqual({ op: 'H', nodeName: 'n1' });
  });

  it('never throws on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
        const buf = Buffer.from(bytes);
        parseReply(buf, 0, buf.length);
      }),
      { numRuns: 20_000 },
    );
  });

  it('formats error texts onto one line of at most 512 bytes', () => {
    expect(formatReply({ op: 'E', code: 'internal', text: 'a\nb\r\x00c' })).toBe('E internal a b  c\n');
    const long = formatReply({ op: 'E', code: 'proto', text: 'é'.repeat(400) });
    expect(Buffer.byteLength(long) - 1).toBeLessThanOrEqual(512);
    expect(long.endsWith('é\n')).toBe(true);
  });
});

describe('line framing', () => {
  const sample = 'A k 5 30\nR k 12\r\nP\nH 1 tok\n\nA \u00e9 0 1\r\n';
  const expectedLines = ['A k 5 30', 'R k 12', 'P', 'H 1 tok', '', 'A \u00e9 0 1'];

  function frame(chunks: Buffer[]): string[] {
    const framer = new LineFramer();
    const lines: string[] = [];
    for (const c of chunks) {
      const r = framer.push(c, (buf, s, e) => {
        lines.push(buf.toString('utf8', s, e));
        return true;
      });
      expect(r).toBe('more');
    }
    expect(framer.hasPartialLine).toBe(false);
    return lines;
  }

  it('gives the same lines whatever the split point', () => {
    const bytes = Buffer.from(sample);
    for (let i = 0; i <= bytes.length; i++) {
      expect(frame([bytes.subarray(0, i), bytes.subarray(i)])).toEqual(expectedLines);
    }
  });

  it('gives the same lines whatever the two split points', () => {
    const bytes = Buffer.from(sample);
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i; j <= bytes.length; j++) {
        expect(frame([bytes.subarray(0, i), bytes.subarray(i, j), bytes.subarray(j)])).toEqual(expectedLines);
      }
    }
  });

  it('gives the same lines byte by byte', () => {
    const bytes = Buffer.from(sample);
    expect(frame([...bytes].map((b) => Buffer.from([b])))).toEqual(expectedLines);
  });

  it('accepts 512 bytes plus \\r\\n and rejects 513', () => {
    const ok = Buffer.from(`A ${'k'.repeat(250)} 5 30`.padEnd(512, 'x') + '\r\n');
    const framer = new LineFramer();
    let len = -1;
    expect(framer.push(ok, (_b, s, e) => ((len = e - s), true))).toBe('more');
    expect(len).toBe(512);
    expect(new LineFramer().push(Buffer.from('x'.repeat(513) + '\n'), () => true)).toBe('toolong');
    expect(new LineFramer().push(Buffer.from('x'.repeat(513) + '\r\n'), () => true)).toBe('toolong');
  });

  it('rejects an unterminated line as soon as 514 bytes have arrived', () => {
    const framer = new LineFramer();
    expect(framer.push(Buffer.from('x'.repeat(513)), () => true)).toBe('more');
    expect(framer.push(Buffer.from('x'), () => true)).toBe('toolong');
  });

  it('stops when the handler says so', () => {
    const seen: string[] = [];
    const r = new LineFramer().push(Buffer.from('P\nX\nP\n'), (b, s, e) => {
      seen.push(b.toString('latin1', s, e));
      return seen.length < 2;
    });
    expect(r).toBe('stopped');
    expect(seen).toEqual(['P', 'X']);
  });
});
