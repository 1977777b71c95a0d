/**
 * Connections of a listener whose clients are few and polite (the admin
 * listener: scrapers, probes, a browser), kept within `total` and
 * `perAddress` without letting idle ones lock the others out: when a new
 * connection finds the listener (or its address) full, the connection that
 * has been idle longest (connected but no request in progress: a slowloris
 * that never finishes its headers counts as idle) is closed to make room.
 * Only when every connection is busy is the new one refused. So a flood of
 * idle sockets cannot keep the liveness probe out (issue 25, finding 7).
 */
export interface PooledConnection {
  readonly remoteAddress: string | undefined;
  close(): void;
}

interface Entry {
  readonly connection: PooledConnection;
  readonly address: string;
  busy: number;
  /** When it last became idle (a counter: only the order matters). */
  idleSince: number;
}

export class IdleEvictingPool {
  private readonly entries = new Set<Entry>();
  private tick = 0;
  /** Idle connections closed to make room, and connections refused because every one was busy. */
  evicted = 0;
  refused = 0;

  constructor(private readonly limits: { readonly total: number; readonly perAddress: number }) {}

  get size(): number {
    return this.entries.size;
  }

  /** Admits a connection (closing the longest-idle one if full); undefined when it must be refused. */
  admit(connection: PooledConnection): { busy(): void; idle(): void; release(): void } | undefined {
    const address = connection.remoteAddress ?? '?';
    const ofAddress = [...this.entries].filter((e) => e.address === address);
    if (ofAddress.length >= this.limits.perAddress && !this.evictFrom(ofAddress)) return this.refuse();
    if (this.entries.size >= this.limits.total && !this.evictFrom([...this.entries])) return this.refuse();
    const entry: Entry = { connection, address, busy: 0, idleSince: this.tick++ };
    this.entries.add(entry);
    return {
      busy: () => void entry.busy++,
      idle: () => {
        entry.busy = Math.max(0, entry.busy - 1);
        if (entry.busy === 0) entry.idleSince = this.tick++;
      },
      release: () => void this.entries.delete(entry),
    };
  }

  private refuse(): undefined {
    this.refused++;
    return undefined;
  }

  /** Closes the longest-idle connection among `candidates`; false when all are busy. */
  private evictFrom(candidates: Entry[]): boolean {
    let oldest: Entry | undefined;
    for (const e of candidates) if (e.busy === 0 && (oldest === undefined || e.idleSince < oldest.idleSince)) oldest = e;
    if (oldest === undefined) return false;
    this.entries.delete(oldest);
    this.evicted++;
    oldest.connection.close();
    return true;
  }
}
