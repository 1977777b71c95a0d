/**
 * One simulated process on one simulated machine: the seams a real
 * TicketingNode is started with (clock, transport, disk, randomness), backed
 * by the simulation's scheduler, network and file system. When the process
 * dies, everything it had in flight dies with it: timers, disk operations,
 * connections. Nothing of a dead process ever runs again.
 */
import type { Clock, Disk, DiskFile, DiskFileSync, Environment, Listener, ListenOptions, OpenMode, Stream, TimerHandle, Transport } from '@ticketing/server';
import { modelTlsHandshake } from '@ticketing/server';
import { CPU_COST, type Event, type Scheduler } from './scheduler.js';
import type { SimClock } from './sim-clock.js';
import type { SimFs } from './sim-fs.js';
import type { SimNetwork, SimSocket } from './sim-network.js';


/** Data-directory locks per simulated disk: path -> the pid holding it (see Disk.lockFile). */
const LOCKS = new WeakMap<object, Map<string, number>>();
function lockHolders(fs: object): Map<string, number> {
  let m = LOCKS.get(fs);
  if (m === undefined) LOCKS.set(fs, (m = new Map<string, number>()));
  return m;
}

/** Simulated latency of disk operations, ms: writes through O_DSYNC and fsyncs cost the most. */
export interface DiskLatency {
  readonly write: [number, number];
  readonly sync: [number, number];
  readonly meta: [number, number];
}

export const DEFAULT_DISK_LATENCY: DiskLatency = { write: [0.02, 0.2], sync: [0.3, 3], meta: [0.02, 0.3] };

let nextPid = 1000;

/** The TLS settings each simulated dial was made with (the listener side models the handshake). */
const dialTls = new WeakMap<SimSocket, Parameters<typeof modelTlsHandshake>[1]>();

export class SimProcess {
  readonly pid = nextPid++;
  alive = true;
  /** Disk operations in flight: cancelled if the process dies first. */
  private readonly inFlight = new Set<Event>();
  /** Writes issued and not returned (the file system's ids): a kill means they never happened. */
  private readonly writing = new Set<number>();
  readonly env: Environment;

  constructor(
    readonly host: string,
    private readonly sched: Scheduler,
    readonly clock: SimClock,
    private readonly net: SimNetwork,
    /** The machine's file system (it outlives processes; a power loss replaces it). */
    private readonly fsOf: () => SimFs,
    /** Pids alive on the machine (the data-directory lock asks). */
    private readonly alivePids: () => ReadonlySet<number>,
    /** How many times slower than `diskLatency` the machine's disk is now (a stalled disk: > 1). */
    private readonly diskSlowdown: () => number = () => 1,
    readonly diskLatency: DiskLatency = DEFAULT_DISK_LATENCY,
  ) {
    this.env = {
      clock: this.makeClock(),
      transport: this.makeTransport(),
      disk: this.makeDisk(),
      random: sched.random,
      probes: { buggify: (point) => this.alive && sched.buggify(point), reached: (path) => sched.reached(path), spend: (ns) => sched.spend(ns) },
    };
  }

  /**
   * A crash point (FoundationDB's "buggify" of disk I/O): `crash` runs right
   * after the process's `remaining`-th disk operation from now completes,
   * before the code that awaited it goes on to its next operation. Multi-step
   * disk sequences (a snapshot switching WAL segments, a rename and its
   * directory fsync) are cut exactly between their steps. With `during`, it
   * runs while that operation is under way instead: a power loss then tears
   * the write in flight (sim-fs.ts).
   */
  crashAfterDiskOps(remaining: number, crash: () => void, during = false): void {
    this.crashPoint = { remaining, crash, during };
  }

  private crashPoint: { remaining: number; crash: () => void; during: boolean } | undefined;

  /** The process dies: no timer, disk completion or socket event of it runs again. */
  kill(): void {
    if (!this.alive) return;
    this.alive = false;
    this.clock.clearAll();
    for (const e of this.inFlight) e.cancelled = true;
    this.inFlight.clear();
    for (const id of this.writing) this.fsOf().endWrite(id);
    this.writing.clear();
    this.net.processDied(this.host);
  }

  // --- clock ---

  private makeClock(): Clock {
    const c = this.clock;
    const guard = (fn: () => void) => () => {
      if (this.alive) fn();
    };
    return {
      now: () => c.now(),
      wallNow: () => c.wallMs(),
      schedule: (ms: number, fn: () => void): TimerHandle => {
        const t = c.setTimeout(guard(fn), ms);
        return { cancel: () => c.clear(t) };
      },
      every: (ms: number, fn: () => void): TimerHandle => {
        const t = c.setInterval(guard(fn), ms);
        return { cancel: () => c.clear(t) };
      },
      soon: (fn: () => void) => void c.setImmediate(guard(fn)),
      // process.nextTick: before anything else of this turn; the scheduler drains microtasks after every event.
      defer: (fn: () => void) => queueMicrotask(guard(fn)),
    };
  }

  // --- disk ---

  /** Completes `op` after a latency in `range`, unless the process dies first. */
  private async later<T>(range: [number, number], label: string, op: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const delay = (range[0] + this.sched.random() * (range[1] - range[0])) * this.diskSlowdown();
      const during = this.crashPoint;
      if (during?.during === true && --during.remaining <= 0) {
        this.crashPoint = undefined;
        this.sched.after(delay / 2, `${this.host}: crash point during disk ${label}`, during.crash);
      }
      const complete = () => {
        this.inFlight.delete(e);
        const point = this.crashPoint;
        if (point !== undefined && !point.during && --point.remaining <= 0) {
          this.crashPoint = undefined;
          this.sched.after(0, `${this.host}: crash point after disk ${label}`, point.crash);
        }
        try {
          resolve(op());
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      };
      // What awaited it goes on on the machine's CPU (scheduler.ts, CPU_COST).
      const e = this.sched.after(delay, `${this.host}: disk ${label}`, complete, this.host);
      this.inFlight.add(e);
    });
  }

  private makeDisk(): Disk {
    const fs = () => this.fsOf();
    const lat = this.diskLatency;
    const flags = (mode: OpenMode) =>
      mode === 'write'
        ? { create: true, truncate: true }
        : mode === 'append-dsync'
          ? { create: true, append: true, dsync: true }
          : { create: true, exclusive: true };
    // An asynchronous call costs the event loop its setup (the work runs on libuv's threads); a
    // synchronous one costs the copy too (scheduler.ts, CPU_COST).
    const call = () => this.sched.spend(CPU_COST.diskCall);
    const copy = (bytes: number) => this.sched.spend(CPU_COST.diskCall + bytes * CPU_COST.diskByte);
    const file = (fd: number, path: string): DiskFile => ({
      write: async (data) => {
        call();
        const bytes = Buffer.from(data);
        // Issued now: until it returns, a power loss may leave some of its sectors (sim-fs.ts).
        const id = fs().beginWrite(fd, bytes);
        this.writing.add(id);
        return this.later(lat.write, `write ${path}`, () => {
          this.writing.delete(id);
          fs().endWrite(id);
          return fs().write(fd, bytes);
        });
      },
      sync: async () => {
        call();
        return this.later(lat.sync, `fsync ${path}`, () => fs().fsync(fd));
      },
      close: async () => {
        call();
        return this.later(lat.meta, `close ${path}`, () => fs().close(fd));
      },
    });
    const fileSync = (fd: number): DiskFileSync => ({
      write: (data) => {
        copy(data.length);
        return fs().write(fd, Buffer.from(data));
      },
      sync: () => {
        call();
        return fs().fsync(fd);
      },
      close: () => {
        call();
        return fs().close(fd);
      },
    });
    const ignoreMissing = (fn: () => void) => {
      try {
        fn();
      } catch (err) {
        if ((err as { code?: string }).code !== 'ENOENT') throw err;
      }
    };
    return {
      mkdir: (dir) => fs().mkdir(dir, true),
      list: (dir) => fs().list(dir),
      readFile: (path) => {
        const data = fs().readFile(path);
        copy(data.length);
        return data;
      },
      size: (path) => fs().size(path),
      truncate: (path, size) => fs().truncate(path, size),
      open: async (path, mode) => this.later(lat.meta, `open ${path}`, () => file(fs().open(path, flags(mode)), path)),
      openSync: (path, mode) => fileSync(fs().open(path, flags(mode))),
      rename: async (from, to) => this.later(lat.meta, `rename ${from}`, () => fs().rename(from, to)),
      renameSync: (from, to) => fs().rename(from, to),
      syncDir: async (dir) => this.later(lat.sync, `fsync dir ${dir}`, () => fs().fsyncDir(dir)),
      syncDirSync: (dir) => fs().fsyncDir(dir),
      unlink: async (path) => this.later(lat.meta, `unlink ${path}`, () => ignoreMissing(() => fs().unlink(path))),
      unlinkSync: (path) => ignoreMissing(() => fs().unlink(path)),
      // A kernel lock: held by this process until it releases it or dies (any other live process is refused).
      lockFile: (path) => {
        const holders = lockHolders(fs());
        const holder = holders.get(path);
        if (holder !== undefined && this.alivePids().has(holder)) return undefined;
        holders.set(path, this.pid);
        return {
          write: () => {},
          release: () => {
            if (holders.get(path) === this.pid) holders.delete(path);
          },
        };
      },
    };
  }

  // --- transport ---

  private makeTransport(): Transport {
    return {
      listen: async (options: ListenOptions, onStream: (stream: Stream) => void): Promise<Listener> => {
        await Promise.resolve(); // binding takes a turn, as a real listen does
        const accepted = new Set<SimSocket>();
        const l = this.net.listen(this.host, options.port, (s) => {
          if (!this.alive) return s.destroy();
          // No real TLS here: decide what the handshake would (two peer tokens refuse each other).
          const failure = modelTlsHandshake(options.tls, s.peer === undefined ? undefined : dialTls.get(s.peer));
          if (failure !== undefined) {
            s.destroy();
            s.peer?.destroy(failure.kind === 'error' ? failure.error : undefined);
            return;
          }
          accepted.add(s);
          s.once('close', () => accepted.delete(s));
          onStream(s);
        });
        return {
          address: () => ({ address: this.host, port: options.port }),
          updateTls: () => {},
          close: async () => {
            l.close();
            while (accepted.size > 0 && this.alive) await new Promise<void>((r) => this.clock.setTimeout(r, 10, 'listener close wait'));
          },
        };
      },
      connect: (options, onConnect): Stream => {
        const s = this.net.connect(this.host, options.host, options.port);
        dialTls.set(s, options.tls);
        s.once('connect', () => {
          if (this.alive) onConnect();
        });
        return s;
      },
    };
  }
}
