/**
 * A small closed-loop HTTP load generator: `connections` lanes, each with its own keep-alive
 * socket, sending the next request as soon as the previous answer arrives. Loopback only.
 * Requests in the warm-up are sent but not counted.
 */
import { Agent, request } from 'node:http';

export interface LoadRequest {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly body?: Buffer;
  readonly headers?: Readonly<Record<string, string>>;
}

export interface LoadOptions {
  readonly port: number;
  readonly connections: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  /** The n-th request of a lane. */
  readonly next: (lane: number, n: number) => LoadRequest;
  /** Status that counts as success. */
  readonly okStatus?: number;
}

export interface LoadResult {
  readonly ok: number;
  readonly failed: number;
  readonly seconds: number;
  readonly perSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

function send(agent: Agent, port: number, req: LoadRequest): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...req.headers };
    if (req.body !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = req.body.length;
    }
    const out = request({ host: '127.0.0.1', port, method: req.method, path: req.path, headers, agent }, (res) => {
      res.resume();
      res.on('end', () => {
        resolve(res.statusCode ?? 0);
      });
      res.on('error', reject);
    });
    out.on('error', reject);
    out.end(req.body);
  });
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections, maxFreeSockets: options.connections });
  const okStatus = options.okStatus ?? 200;
  const start = performance.now();
  const measureFrom = start + options.warmupMs;
  const end = measureFrom + options.durationMs;
  let ok = 0;
  let failed = 0;
  const latencies: number[] = [];
  const lanes = Array.from({ length: options.connections }, async (_, lane) => {
    for (let n = 0; ; n++) {
      const sentAt = performance.now();
      if (sentAt >= end) return;
      let status = 0;
      try {
        status = await send(agent, options.port, options.next(lane, n));
      } catch {
        status = 0;
      }
      const doneAt = performance.now();
      if (sentAt < measureFrom || doneAt > end) continue;
      if (status === okStatus) {
        ok++;
        if ((ok & 7) === 0) latencies.push(doneAt - sentAt);
      } else {
        failed++;
      }
    }
  });
  await Promise.all(lanes);
  agent.destroy();
  const seconds = options.durationMs / 1000;
  latencies.sort((a, b) => a - b);
  return {
    ok,
    failed,
    seconds,
    perSecond: ok / seconds,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
  };
}
