/**
 * A TCP fault proxy for one link (e.g. worker-2 → sink): listens on its own loopback port and
 * forwards every connection to the real target, in one of these modes:
 *
 * | mode        | effect                                                                                       |
 * |-------------|----------------------------------------------------------------------------------------------|
 * | `pass`      | forward both ways                                                                            |
 * | `blackhole` | forward nothing, keep the sockets: bytes are held (TCP backpressure, like a partition where   |
 * |             | the kernel retransmits) and delivered in order on heal; new connections are accepted but not |
 * |             | connected upstream until then                                                                |
 * | `one-way`   | hold (or, with `discard`, drop) one direction: `to-target` or `to-client`                     |
 * | `reset`     | every open connection and every new one is destroyed with a TCP RST                          |
 * | `latency`   | each chunk is delayed by `delayMs` + uniform [0, `jitterMs`), order kept per direction        |
 *
 * Pure node:net, no root. Jitter comes from an injected random source so schedules replay.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export type Direction = 'to-target' | 'to-client';

export type ProxyMode =
  | { readonly kind: 'pass' }
  | { readonly kind: 'blackhole' }
  | { readonly kind: 'one-way'; readonly direction: Direction; readonly discard?: boolean }
  | { readonly kind: 'reset' }
  | { readonly kind: 'latency'; readonly delayMs: number; readonly jitterMs: number };

export interface FaultProxyOptions {
  /** Link name, e.g. `worker-1->sink`. */
  readonly name: string;
  readonly targetHost?: string;
  readonly targetPort: number;
  readonly listenHost?: string;
  /** 0 (default) = any free port. */
  readonly listenPort?: number;
  /** Random source in [0, 1) for jitter. Default: a fixed-seed generator. */
  readonly random?: () => number;
}

export interface ProxyStats {
  accepted: number;
  reset: number;
  bytesToTarget: number;
  bytesToClient: number;
  dropped: number;
  /** Bytes a cut direction received and held back (counted once, when held; delivered on heal). */
  held: number;
}

interface Leg {
  readonly from: Socket;
  readonly to: Socket;
  readonly direction: Direction;
  /** Chunks held while the direction is cut. */
  held: Buffer[];
  /** Delayed chunks, due times non-decreasing (keeps order under jitter); one timer drains them. */
  delayed: { dueAtMs: number; chunk: Buffer }[];
  timer: NodeJS.Timeout | undefined;
  pending: number;
  ended: boolean;
  draining: boolean;
}

interface Pair {
  readonly client: Socket;
  upstream: Socket | undefined;
  legs: Leg[];
  closed: boolean;
}

export class FaultProxy {
  readonly name: string;
  readonly targetHost: string;
  readonly targetPort: number;
  readonly stats: ProxyStats = { accepted: 0, reset: 0, bytesToTarget: 0, bytesToClient: 0, dropped: 0, held: 0 };
  #mode: ProxyMode = { kind: 'pass' };
  #server: Server;
  #pairs = new Set<Pair>();
  #port: number | undefined;
  readonly #listenHost: string;
  readonly #listenPort: number;
  readonly #random: () => number;

  constructor(options: FaultProxyOptions) {
    this.name = options.name;
    this.targetHost = options.targetHost ?? '127.0.0.1';
    this.targetPort = options.targetPort;
    this.#listenHost = options.listenHost ?? '127.0.0.1';
    this.#listenPort = options.listenPort ?? 0;
    this.#random = options.random ?? seededRandom(0x5eed);
    this.#server = createServer({ pauseOnConnect: true, allowHalfOpen: true }, (socket) => {
      this.#accept(socket);
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#listenPort, this.#listenHost, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error(`${this.name}: no TCP address`);
    this.#port = address.port;
    return this;
  }

  get port(): number {
    if (this.#port === undefined) throw new Error(`${this.name} is not listening`);
    return this.#port;
  }

  get host(): string {
    return this.#listenHost;
  }

  /** `http://host:port` of the proxy (what the client side is configured with). */
  get url(): string {
    return `http://${this.#listenHost}:${this.port}`;
  }

  get mode(): ProxyMode {
    return this.#mode;
  }

  get connections(): number {
    return this.#pairs.size;
  }

  setMode(mode: ProxyMode): void {
    this.#mode = mode;
    if (mode.kind === 'reset') {
      for (const pair of [...this.#pairs]) this.#reset(pair);
      return;
    }
    for (const pair of this.#pairs) {
      if (pair.upstream === undefined && mode.kind !== 'blackhole') this.#connectUpstream(pair);
      for (const leg of pair.legs) this.#pump(leg);
    }
  }

  heal(): void {
    this.setMode({ kind: 'pass' });
  }

  /** Stop listening and destroy every connection. */
  async close(): Promise<void> {
    for (const pair of [...this.#pairs]) this.#destroy(pair);
    await new Promise<void>((resolve) => {
      this.#server.close(() => {
        resolve();
      });
    });
  }

  #accept(client: Socket): void {
    this.stats.accepted += 1;
    client.setNoDelay(true);
    const pair: Pair = { client, upstream: undefined, legs: [], closed: false };
    this.#pairs.add(pair);
    client.on('error', () => {
      this.#destroy(pair, true);
    });
    client.on('close', () => {
      this.#destroy(pair);
    });
    if (this.#mode.kind === 'reset') {
      this.#reset(pair);
      return;
    }
    if (this.#mode.kind !== 'blackhole') this.#connectUpstream(pair);
  }

  #connectUpstream(pair: Pair): void {
    const upstream = connect({ host: this.targetHost, port: this.targetPort, allowHalfOpen: true });
    upstream.setNoDelay(true);
    pair.upstream = upstream;
    upstream.on('error', () => {
      // Refused or reset by the target: the client sees a reset too.
      this.#destroy(pair, true);
    });
    upstream.on('close', () => {
      this.#destroy(pair);
    });
    upstream.once('connect', () => {
      if (pair.closed) return;
      pair.legs = [this.#leg(pair.client, upstream, 'to-target'), this.#leg(upstream, pair.client, 'to-client')];
      pair.client.resume();
    });
  }

  #leg(from: Socket, to: Socket, direction: Direction): Leg {
    const leg: Leg = {
      from,
      to,
      direction,
      held: [],
      delayed: [],
      timer: undefined,
      pending: 0,
      ended: false,
      draining: false,
    };
    from.on('data', (chunk: Buffer) => {
      this.#forward(leg, chunk);
    });
    from.on('end', () => {
      leg.ended = true;
      this.#maybeEnd(leg);
    });
    return leg;
  }

  #cut(direction: Direction): 'hold' | 'discard' | undefined {
    const m = this.#mode;
    if (m.kind === 'blackhole') return 'hold';
    if (m.kind === 'one-way' && m.direction === direction) return m.discard === true ? 'discard' : 'hold';
    return undefined;
  }

  #forward(leg: Leg, chunk: Buffer): void {
    const cut = this.#cut(leg.direction);
    if (cut === 'discard') {
      this.stats.dropped += chunk.length;
      return;
    }
    if (cut === 'hold' || leg.held.length > 0) {
      leg.held.push(chunk);
      this.stats.held += chunk.length;
      // Stop reading: the sender's kernel buffers fill up, as behind a real partition.
      if (cut === 'hold') leg.from.pause();
      return;
    }
    this.#deliver(leg, chunk);
  }

  #deliver(leg: Leg, chunk: Buffer): void {
    const m = this.#mode;
    if (m.kind === 'latency') {
      const last = leg.delayed.at(-1)?.dueAtMs ?? 0;
      const dueAtMs = Math.max(last, Date.now() + m.delayMs + Math.floor(this.#random() * m.jitterMs));
      leg.delayed.push({ dueAtMs, chunk });
      leg.pending += 1;
      this.#armDelay(leg);
      return;
    }
    if (leg.pending > 0) {
      // Chunks still delayed from a latency window go first.
      leg.delayed.push({ dueAtMs: 0, chunk });
      leg.pending += 1;
      return;
    }
    this.#write(leg, chunk);
  }

  #armDelay(leg: Leg): void {
    if (leg.timer !== undefined) return;
    const head = leg.delayed[0];
    if (head === undefined) return;
    leg.timer = setTimeout(
      () => {
        leg.timer = undefined;
        const now = Date.now();
        while (leg.delayed.length > 0 && (leg.delayed[0]?.dueAtMs ?? 0) <= now) {
          const next = leg.delayed.shift();
          leg.pending -= 1;
          if (next !== undefined) this.#write(leg, next.chunk);
        }
        this.#armDelay(leg);
        this.#maybeEnd(leg);
      },
      Math.max(0, head.dueAtMs - Date.now()),
    );
  }

  #write(leg: Leg, chunk: Buffer): void {
    if (leg.to.destroyed) return;
    if (leg.direction === 'to-target') this.stats.bytesToTarget += chunk.length;
    else this.stats.bytesToClient += chunk.length;
    if (!leg.to.write(chunk) && !leg.draining) {
      leg.draining = true;
      leg.from.pause();
      leg.to.once('drain', () => {
        leg.draining = false;
        if (this.#cut(leg.direction) === undefined) leg.from.resume();
      });
    }
  }

  /** Deliver held chunks once the direction is open again. */
  #pump(leg: Leg): void {
    const cut = this.#cut(leg.direction);
    if (cut === 'hold') return;
    const held = leg.held;
    leg.held = [];
    for (const chunk of held) {
      if (cut === 'discard') this.stats.dropped += chunk.length;
      else this.#deliver(leg, chunk);
    }
    if (cut === undefined && !leg.draining) leg.from.resume();
    this.#maybeEnd(leg);
  }

  #maybeEnd(leg: Leg): void {
    if (leg.ended && leg.held.length === 0 && leg.pending === 0 && !leg.to.destroyed) leg.to.end();
  }

  #reset(pair: Pair): void {
    this.stats.reset += 1;
    pair.closed = true;
    this.#pairs.delete(pair);
    this.#clearTimers(pair);
    pair.client.resetAndDestroy();
    pair.upstream?.resetAndDestroy();
  }

  #clearTimers(pair: Pair): void {
    for (const leg of pair.legs) {
      if (leg.timer !== undefined) clearTimeout(leg.timer);
      leg.timer = undefined;
    }
  }

  #destroy(pair: Pair, reset = false): void {
    if (pair.closed) return;
    // Let a half-closed leg finish delivering before tearing the pair down.
    if (!reset && pair.legs.some((l) => l.held.length > 0 || l.pending > 0)) {
      setTimeout(() => {
        this.#destroy(pair);
      }, 50);
      return;
    }
    pair.closed = true;
    this.#pairs.delete(pair);
    this.#clearTimers(pair);
    if (reset) {
      if (!pair.client.destroyed) pair.client.resetAndDestroy();
      if (pair.upstream !== undefined && !pair.upstream.destroyed) pair.upstream.resetAndDestroy();
    } else {
      pair.client.destroy();
      pair.upstream?.destroy();
    }
  }
}

/** mulberry32: a small seeded PRNG in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Start one proxy in front of `targetPort`. */
export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  return new FaultProxy(options).start();
}
