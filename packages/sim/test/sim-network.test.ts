import { describe, expect, it } from 'vitest';
import { Scheduler } from '../src/scheduler.js';
import { SimNetwork, type SimSocket } from '../src/sim-network.js';

function setup(seed = 1) {
  const sched = new Scheduler(seed);
  const net = new SimNetwork(sched, { minLatency: 0.1, maxLatency: 3, maxChunk: 7, highWaterMark: 64 });
  const accepted: SimSocket[] = [];
  net.listen('b', 5225, (s) => accepted.push(s));
  return { sched, net, accepted };
}

function collect(s: SimSocket): { text: () => string; events: string[] } {
  let text = '';
  const events: string[] = [];
  s.on('data', (d: Buffer) => (text += d.toString()));
  for (const e of ['end', 'close', 'error', 'connect', 'drain']) s.on(e, (x?: unknown) => events.push(e === 'error' ? `error:${(x as { code?: string }).code}` : e));
  return { text: () => text, events };
}

describe('SimNetwork', () => {
  it('delivers a stream in order, in random chunks; FIN both ways closes both ends', async () => {
    const { sched, net } = setup(2);
    let got = '';
    let ended = false;
    net.listen('c', 1, (s) => {
      s.on('data', (d: Buffer) => (got += d.toString()));
      s.on('end', () => {
        ended = true;
        s.end();
      });
    });
    const c = net.connect('a', 'c', 1);
    const ev = collect(c);
    const message = Array.from({ length: 100 }, (_, i) => `request ${i}\n`).join('');
    c.on('connect', () => {
      c.write(message);
      c.end();
    });
    await sched.run(10_000);
    expect(got).toBe(message);
    expect(ended).toBe(true);
    expect(ev.events).toContain('close');
  });

  it('a black hole holds the bytes; after the heal they arrive in order (TCP retransmits)', async () => {
    const { sched, net } = setup(3);
    let got = '';
    net.listen('c', 1, (s) => s.on('data', (d: Buffer) => (got += d.toString())));
    const c = net.connect('a', 'c', 1);
    await sched.run(50);
    net.partition('a', 'c', 'drop');
    c.write('first\nsecond\n');
    await sched.run(2_000);
    expect(got).toBe('');
    net.heal('a', 'c');
    await sched.run(3_000);
    expect(got).toBe('first\nsecond\n');
  });

  it('a connection attempt into a black hole hears nothing; to a host with no listener it is refused', async () => {
    const { sched, net } = setup(4);
    net.listen('c', 1, () => {});
    net.partition('a', 'c', 'drop');
    const silent = collect(net.connect('a', 'c', 1));
    const refused = collect(net.connect('a', 'd', 1));
    await sched.run(5_000);
    expect(silent.events).toEqual([]);
    expect(refused.events).toEqual(['error:ECONNREFUSED', 'close']);
  });

  it('a one-way black hole stops one direction only', async () => {
    const { sched, net } = setup(5);
    let atServer = '';
    let server: SimSocket | undefined;
    net.listen('c', 1, (s) => {
      server = s;
      s.on('data', (d: Buffer) => (atServer += d.toString()));
    });
    const c = net.connect('a', 'c', 1);
    const ev = collect(c);
    await sched.run(50);
    net.partition('a', 'c', 'drop', true);
    c.write('lost\n');
    server!.write('heard\n');
    await sched.run(1_000);
    expect(atServer).toBe('');
    expect(ev.text()).toBe('heard\n');
  });

  it('a reset partition resets open connections and refuses new ones', async () => {
    const { sched, net } = setup(6);
    const atServer: string[] = [];
    net.listen('c', 1, (s) => s.on('error', (e: { code: string }) => atServer.push(e.code)));
    const c = collect(net.connect('a', 'c', 1));
    await sched.run(50);
    net.partition('a', 'c', 'reset');
    await sched.run(100);
    expect(c.events).toEqual(['connect', 'error:ECONNRESET', 'close']);
    expect(atServer).toEqual(['ECONNRESET']);
  });

  it('a dead process resets its peers; a vanished machine tells them nothing', async () => {
    const { sched, net } = setup(7);
    net.listen('c', 1, () => {});
    net.listen('d', 1, () => {});
    const toC = collect(net.connect('a', 'c', 1));
    const toD = collect(net.connect('a', 'd', 1));
    await sched.run(50);
    net.processDied('c');
    net.machineVanished('d');
    await sched.run(5_000);
    expect(toC.events).toEqual(['connect', 'error:ECONNRESET', 'close']);
    expect(toD.events).toEqual(['connect']);
  });

  it('write() says to wait when too much is in flight, and drain follows delivery', async () => {
    const { sched, net } = setup(8);
    net.listen('c', 1, (s) => s.pause());
    const c = net.connect('a', 'c', 1);
    const ev = collect(c);
    await sched.run(50);
    expect(c.write(Buffer.alloc(100))).toBe(false);
    await sched.run(1_000);
    expect(ev.events).toContain('drain');
  });

  it('replays exactly from its seed', async () => {
    const trace = async () => {
      const { sched, net } = setup(9);
      net.listen('c', 1, (s) => s.on('data', () => {}));
      const c = net.connect('a', 'c', 1);
      c.on('connect', () => c.write('x'.repeat(200)));
      await sched.run(1_000);
      return sched.recent.join('\n');
    };
    expect(await trace()).toBe(await trace());
  });
});
