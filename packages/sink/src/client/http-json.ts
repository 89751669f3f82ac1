/**
 * One JSON request over node:http with a keep-alive agent and a per-request deadline. Transport
 * failures (refused, reset, timeout, unparsable reply) become LeaseholdError('UNAVAILABLE',
 * retryable): the outcome is unknown, and every sink operation is safe to repeat (an advance to the
 * same token is `unchanged`, a write of the same payload is `replayed`).
 */
import { Agent, request as httpRequest } from 'node:http';
import { LeaseholdError } from '@leasehold/protocol';

export interface JsonReply {
  readonly status: number;
  readonly body: unknown;
}

export interface JsonRequest {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly body?: unknown;
  readonly bearer?: string | undefined;
  readonly timeoutMs: number;
}

export function createAgent(maxSockets: number): Agent {
  return new Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets, scheduling: 'lifo' });
}

export function requestJson(base: URL, agent: Agent, req: JsonRequest): Promise<JsonReply> {
  return new Promise<JsonReply>((resolve, reject) => {
    const payload = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body), 'utf8');
    const headers: Record<string, string | number> = { accept: 'application/json' };
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = payload.length;
    }
    if (req.bearer !== undefined) headers.authorization = `Bearer ${req.bearer}`;
    const what = `${req.method} ${req.path.split('?')[0] ?? ''}`;
    let settled = false;
    const fail = (message: string, cause?: unknown): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(new LeaseholdError('UNAVAILABLE', `sink ${what}: ${message}`, { cause, retryable: true }));
    };
    const outgoing = httpRequest(
      {
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        method: req.method,
        path: req.path,
        headers,
        agent,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', (err) => {
          fail('response failed', err);
        });
        res.on('end', () => {
          if (settled) return;
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          try {
            body = text.length === 0 ? undefined : JSON.parse(text);
          } catch (err) {
            fail(`unparsable reply (status ${res.statusCode ?? 0})`, err);
            return;
          }
          settled = true;
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, body });
        });
      },
    );
    const timer = setTimeout(() => {
      fail(`no reply within ${req.timeoutMs} ms`);
      outgoing.destroy();
    }, req.timeoutMs);
    outgoing.on('error', (err) => {
      fail(err.message, err);
    });
    outgoing.end(payload);
  });
}
