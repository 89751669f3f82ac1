/**
 * One HTTP/1.1 request over a plain socket with exactly the request-target given: no client-side
 * URL parsing or normalisation, so tests see what the server does with the bytes an attacker sends.
 */
import { connect } from 'node:net';

export interface RawHttpAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

export interface RawHttpRequest {
  readonly method: string;
  readonly target: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** Sent as is; a Content-Length is added. */
  readonly body?: string;
}

export function rawHttp(port: number, request: RawHttpRequest, host = '127.0.0.1'): Promise<RawHttpAnswer> {
  const body = request.body ?? '';
  const lines = [`${request.method} ${request.target} HTTP/1.1`, `Host: ${host}`, 'Connection: close'];
  for (const [name, value] of Object.entries(request.headers ?? {})) lines.push(`${name}: ${value}`);
  if (request.body !== undefined) lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  const head = `${lines.join('\r\n')}\r\n\r\n`;
  return new Promise((resolve, reject) => {
    const socket = connect(port, host, () => {
      socket.write(head + body);
    });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const headLines = text.slice(0, split === -1 ? text.length : split).split('\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(headLines[0] ?? '')?.[1] ?? 0);
      const headers: Record<string, string> = {};
      for (const line of headLines.slice(1)) {
        const colon = line.indexOf(':');
        if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status, headers, body: split === -1 ? '' : text.slice(split + 4) });
    });
  });
}

/** `rawHttp` with a JSON body and an optional bearer key. */
export function rawJson(
  port: number,
  method: string,
  target: string,
  options: { readonly key?: string; readonly body?: unknown } = {},
): Promise<RawHttpAnswer> {
  const headers: Record<string, string> = {};
  if (options.key !== undefined) headers.Authorization = `Bearer ${options.key}`;
  if (options.body !== undefined) headers['Content-Type'] = 'application/json';
  return rawHttp(port, {
    method,
    target,
    headers,
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  });
}
