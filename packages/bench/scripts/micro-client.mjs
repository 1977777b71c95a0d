#!/usr/bin/env node
// An in-process micro-benchmark of @ticketing/client: the bench's client
// scenario (50 concurrent callers, each acquire + release on its own key,
// default pool of two connections) against a fake in-memory server that
// answers every line it is given at the end of the event-loop turn, one chunk
// per connection (as a server answers one read). No system calls: the figure
// is the client library's JavaScript (and GC) per pair, plus the fake's
// small, constant share, measured with process.cpuUsage so that other work on
// a shared machine matters less than with wall time. Prints CPU µs per pair,
// best and median of the rounds. Run after `npx tsc -b`:
//
//   node packages/bench/scripts/micro-client.mjs [rounds=7] [msPerRound=1500] [callers=50]
import { EventEmitter } from 'node:events';
import { TicketBroker } from '@ticketing/client';
import { useTransport } from '@ticketing/client/internal';

const ROUNDS = Number(process.argv[2] ?? 7);
const MS = Number(process.argv[3] ?? 1500);
const CALLERS = Number(process.argv[4] ?? 50);

/**
 * 19-digit tokens, like a real server's, made once: formatting a new number
 * per grant would fill V8's number-to-string cache with strings that then
 * outlive young-generation GCs, and the figure would be the fake's GC.
 */
const TOKENS = Array.from({ length: 4096 }, (_, i) => String(1_798_000_000_000_000_000n + BigInt(i) * 7919n));
let grants = 0;

class FakeSocket extends EventEmitter {
  destroyed = false;
  writable = true;
  writableLength = 0;
  errored = null;
  out = '';
  queued = false;
  answer = () => {
    this.queued = false;
    const out = this.out;
    this.out = '';
    this.emit('data', Buffer.from(out, 'latin1'));
  };

  write(data) {
    for (let s = 0; s < data.length; ) {
      const nl = data.indexOf('\n', s);
      const op = data[s];
      // `A key wait lease`, `R key token`, `X key token lease`: the key is the second field.
      const key = op === 'A' || op === 'R' || op === 'X' ? data.slice(s + 2, data.indexOf(' ', s + 2)) : '';
      switch (op) {
        case 'H':
          this.out += 'H 1 fake\n';
          break;
        case 'P':
          this.out += 'P\n';
          break;
        case 'A':
          this.out += `A ${TOKENS[grants++ & 4095]} ${key}\n`;
          break;
        case 'R':
          this.out += `R ${key}\n`;
          break;
        case 'X':
          this.out += `X ${key}\n`;
          break;
      }
      s = nl + 1;
    }
    if (!this.queued) {
      this.queued = true;
      setImmediate(this.answer);
    }
    return true;
  }

  end() {}

  destroy() {
    this.destroyed = true;
  }
}

useTransport({
  open(_address, onConnected) {
    setImmediate(onConnected);
    return new FakeSocket();
  },
});
const broker = TicketBroker.connect('fake:5225');
await broker.waitReady(1_000);

let running = true;
let pairs = 0;
const caller = async (i) => {
  const key = `micro_${i}`;
  while (running) {
    const ticket = await broker.acquire(key, { waitMs: 0, leaseMs: 30_000 });
    await ticket.release();
    pairs++;
  }
};
const callers = Array.from({ length: CALLERS }, async (_, i) => caller(i));
const sleep = async (ms) => new Promise((resolve) => setTimeout(resolve, ms));
await sleep(500);

const perPair = [];
for (let r = 0; r < ROUNDS; r++) {
  const p0 = pairs;
  const c0 = process.cpuUsage();
  await sleep(MS);
  const c = process.cpuUsage(c0);
  perPair.push((c.user + c.system) / (pairs - p0));
}
running = false;
await Promise.all(callers);
await broker.close();
const sorted = [...perPair].sort((a, b) => a - b);
console.log(
  `client CPU per pair (in-process, fake server): best ${sorted[0].toFixed(2)} µs, median ${sorted[Math.floor(sorted.length / 2)].toFixed(2)} µs ` +
    `(${ROUNDS} rounds of ${MS} ms, ${CALLERS} callers): ${perPair.map((x) => x.toFixed(2)).join(' ')}`,
);
process.exit(0);
