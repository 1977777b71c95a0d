import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CorruptStorage, UnsupportedFormat } from '../src/errors.js';
import { nodeDisk } from '../src/seams/node-disk.js';
import { checkDataDirFormat, DATA_DIR_FORMAT } from '../src/storage/data-dir-format.js';

const dir = () => mkdtempSync(join(tmpdir(), 'data-dir-format-'));
describe('the data directory format (FORMAT)', () => {
  it('is recorded when missing, read when known, refused by name when newer, and refused as corrupt when not a number', () => {
    const d = dir();
    expect(checkDataDirFormat(nodeDisk, d)).toBeUndefined();
    expect(readFileSync(join(d, 'FORMAT'), 'utf8')).toBe(`${DATA_DIR_FORMAT}\n`);
    expect(checkDataDirFormat(nodeDisk, d)).toBe(DATA_DIR_FORMAT);
    writeFileSync(join(d, 'FORMAT'), `${DATA_DIR_FORMAT + 1}\n`);
    expect(() => checkDataDirFormat(nodeDisk, d)).toThrow(UnsupportedFormat);
    expect(readFileSync(join(d, 'FORMAT'), 'utf8')).toBe(`${DATA_DIR_FORMAT + 1}\n`);
    writeFileSync(join(d, 'FORMAT'), 'one\n');
    expect(() => checkDataDirFormat(nodeDisk, d)).toThrow(CorruptStorage);
  });
});
