/**
 * The data directory's format version, in its file FORMAT (a number and a
 * newline, as PostgreSQL's PG_VERSION): a release reads the formats it knows
 * and refuses a newer one by name, rather than guess at files it cannot read
 * (or take a newer layout for damage).
 *
 * Format 1: LOCK, token-high-water and token-high-water.ahead, the priority
 * cluster's member record, and in Raft mode raft/ (whose WAL segments and
 * snapshots carry versions of their own, read the same way). A directory
 * without FORMAT was written before formats were recorded: it is format 1,
 * and its first start on this release records that.
 */
import { join } from 'node:path';
import { CorruptStorage, UnsupportedFormat } from '../errors.js';
import type { Disk } from '../seams/disk.js';
import { replaceFileDurablySync } from './durable-dir.js';

/** The format this release writes, and the newest it reads. */
export const DATA_DIR_FORMAT = 1;
export const FORMAT_FILE = 'FORMAT';

/**
 * Checks `dir`'s format (the caller holds its LOCK) and, unless `record` is
 * false (a read-only look), records it when missing. Returns the format found
 * (undefined: none was recorded).
 */
export function checkDataDirFormat(disk: Disk, dir: string, record = true): number | undefined {
  const path = join(dir, FORMAT_FILE);
  let text: string;
  try {
    text = disk.readFile(path).toString('utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    if (record) replaceFileDurablySync(disk, path, Buffer.from(`${DATA_DIR_FORMAT}\n`));
    return undefined;
  }
  const m = /^([1-9][0-9]{0,8})\n?$/.exec(text);
  if (m === null) {
    throw new CorruptStorage(`${path} is corrupt (expected the data directory's format version, a number, found ${JSON.stringify(text.slice(0, 40))}); refusing to start`);
  }
  const format = Number(m[1]);
  if (format > DATA_DIR_FORMAT) {
    throw new UnsupportedFormat(
      `data directory ${dir} has format ${format} (its ${FORMAT_FILE} file), newer than this release reads (${DATA_DIR_FORMAT}): a newer Ticketing wrote it. Run that release (or a newer one) on it; this one refuses rather than misread it`,
    );
  }
  return format;
}
