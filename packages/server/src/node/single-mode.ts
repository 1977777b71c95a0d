/** A node on its own: it serves from the start, with nothing to replicate. */
import type { LeasedRecord } from '../engine/lock-engine.js';
import { LocalLog } from '../state-machine/local-log.js';
import { LockTable } from '../state-machine/lock-table.js';
import type { PeerStatus } from './node-view.js';
import type { ModeHost, NodeMode } from './mode.js';

export class SingleMode implements NodeMode {
  readonly name = 'single';
  readonly role = 'single';
  private readonly table: LockTable<LeasedRecord>;

  constructor(private readonly host: ModeHost) {
    this.table = new LockTable(host.tokenFloor, host.engine.records);
  }

  async start(): Promise<void> {
    this.host.serve(new LocalLog(this.table), (next) => this.host.reserveTokens(next));
    return Promise.resolve();
  }

  async stop(): Promise<void> {
    return Promise.resolve();
  }

  redirectTarget(): undefined {
    return undefined;
  }

  activeAddress(): string | undefined {
    return this.host.listenAddress;
  }

  heldCount(): number {
    return this.table.size;
  }

  lockTable(): LockTable<LeasedRecord> {
    return this.table;
  }

  peers(): PeerStatus[] {
    return [];
  }
}
