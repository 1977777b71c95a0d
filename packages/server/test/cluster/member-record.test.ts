/** The members a priority node's data directory last served with (member-record.ts). */
import { describe, expect, it } from 'vitest';
import { MEMBER_RECORD, readMemberRecord, writeMemberRecord } from '../../src/cluster/member-record.js';
import { MemoryDisk } from '../fakes/memory-disk.js';

describe('member record', () => {
  it('reads back what it wrote, and nothing from a new directory', async () => {
    const disk = new MemoryDisk();
    disk.mkdir('/d');
    expect(readMemberRecord(disk, '/d')).toBeUndefined();
    await writeMemberRecord(disk, '/d', { identity: '0123456789abcdef', names: ['a', 'b', 'c'] });
    expect(readMemberRecord(disk, '/d')).toEqual({ identity: '0123456789abcdef', names: ['a', 'b', 'c'] });
  });

  it('refuses a damaged record with a message that says what to do', () => {
    const disk = new MemoryDisk();
    disk.mkdir('/d');
    const f = disk.openSync(`/d/${MEMBER_RECORD}`, 'write');
    f.write(Buffer.from('garbage\n'));
    f.close();
    expect(() => readMemberRecord(disk, '/d')).toThrow(/corrupt .*remove it to start as a new member/);
  });
});
