/**
 * One JSON request over HTTP or HTTPS (undici, keep-alive pool, per-request deadline). Transport
 * failures (refused, reset, timeout, TLS, unparsable reply) become LeaseholdError('UNAVAILABLE',
 * retryable): the outcome is unknown. Shared by the sink client and the admin client.
 *
 * TLS: pass `tls.ca` to pin the server's CA (only certificates it issued are trusted), and
 * `tls.cert` / `tls.key` for a client certificate (mTLS).
 *
 * Every reply is read into memory up to `maxResponseBytes` (default 65 MiB); a longer one is cut
 * off unread and refused as PAYLOAD_TOO_LARGE (not retryable: the same request gets the same reply).
 */
import { LeaseholdError } from '@leasehold/protocol';
import { Agent, request } from 'undici';

export interface TlsClientOptions {
  /** PEM of the CA(s) to trust instead of the system store (CA pinning). */
  readonly ca?: string | Buffer;
  /** Client certificate and key (PEM) for mutual TLS. */
  readonly cert?: string | Buffer;
  readonly key?: string | Buffer;
  /** Server name to verify when it differs from the URL host. */
  readonly servername?: string;
}

/** `tls` as undici's `connect` options (only the fields given; none without `tls`: the system store). */
export function tlsConnectOptions(tls: TlsClientOptions | undefined): TlsClientOptions {
  if (tls === undefined) return {};
  return {
    ...(tls.ca === undefined ? {} : { ca: tls.ca }),
    ...(tls.cert === undefined ? {} : { cert: tls.cert }),
    ...(tls.key === undefined ? {} : { key: tls.key }),
    ...(tls.servername === undefined ? {} : { servername: tls.servername }),
  };
}

export interface JsonHttpOptions {
  /** Base URL, `http://` or `https://`. */
  readonly url: string;
  /** Per-request deadline. */
  readonly timeoutMs: number;
  /** Keep-alive connections per origin. Default 16. */
  readonly connections?: number;
  readonly tls?: TlsClientOptions;
  /** Who answers, for error messages (`sink`, `coordinator`). */
  readonly peer: string;
  /** Longest reply body read. Default {@link DEFAULT_MAX_RESPONSE_BYTES}. */
  readonly maxResponseBytes?: number;
}

/**
 * 65 MiB: the sink's largest page or result (its body limit is at most 64 MiB, a page at most its
 * READ_PAGE_MAX_BYTES, itself at most 64 MiB) plus room for the envelope.
 */
export const DEFAULT_MAX_RESPONSE_BYTES = 65 * 1024 * 1024;

export interface JsonReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: unknown;
}

export interface JsonRequest {
  readonly method: 'GET' | 'POST' | 'DELETE' | 'PUT';
  readonly path: string;
  readonly body?: unknown;
  /** The body already serialized as JSON (sent as it is; `body` is then ignored). */
  readonly rawBody?: string;
  readonly bearer?: string | undefined;
  readonly headers?: Readonly<Record<string, string>>;
  readonly timeoutMs?: number;
}

export class JsonHttp {
  readonly base: URL;
  readonly #agent: Agent;
  readonly #o: JsonHttpOptions;

  constructor(options: JsonHttpOptions) {
    this.base = new URL(options.url);
    this.#o = options;
    this.#agent = new Agent({
      connections: options.connections ?? 16,
      pipelining: 1,
      connect: tlsConnectOptions(options.tls),
    });
  }

  async request(req: JsonRequest): Promise<JsonReply> {
    const what = `${this.#o.peer} ${req.method} ${req.path.split('?')[0] ?? ''}`;
    const headers: Record<string, string> = { accept: 'application/json', ...req.headers };
    const payload = req.rawBody ?? (req.body === undefined ? undefined : JSON.stringify(req.body));
    if (payload !== undefined) headers['content-type'] = 'application/json';
    if (req.bearer !== undefined) headers.authorization = `Bearer ${req.bearer}`;
    const timeoutMs = req.timeoutMs ?? this.#o.timeoutMs;
    // One deadline for the whole exchange, the reply's body included. A controller and a plain
    // timer, cleared when the exchange ends: `AbortSignal.timeout` cost ~11 µs per request (a weak
    // timer and its finalization), paid once per sink write batch and per fence advance batch.
    const deadline = new AbortController();
    const timer = setTimeout(() => {
      deadline.abort(new DOMException(`no reply within ${timeoutMs} ms`, 'TimeoutError'));
    }, timeoutMs);
    timer.unref();
    try {
      return await this.#exchange(req, what, headers, payload, timeoutMs, deadline.signal);
    } finally {
      clearTimeout(timer);
    }
  }

  async #exchange(
    req: JsonRequest,
    what: string,
    headers: Record<string, string>,
    payload: string | undefined,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<JsonReply> {
    let res;
    try {
      res = await request(new URL(req.path, this.base), {
        method: req.method,
        headers,
        ...(payload === undefined ? {} : { body: payload }),
        dispatcher: this.#agent,
        signal,
      });
    } catch (err) {
      throw unavailable(`${what}: ${describe(err, timeoutMs)}`, err);
    }
    const maxBytes = this.#o.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const tooLarge = () =>
      new LeaseholdError('PAYLOAD_TOO_LARGE', `${what}: reply larger than ${maxBytes} bytes`, { retryable: false });
    const declared = Number(res.headers['content-length'] ?? Number.NaN);
    if (declared > maxBytes) {
      res.body.destroy();
      throw tooLarge();
    }
    let text: string;
    try {
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of res.body) {
        const buffer = chunk as Buffer;
        bytes += buffer.length;
        if (bytes > maxBytes) {
          res.body.destroy();
          throw tooLarge();
        }
        chunks.push(buffer);
      }
      text = Buffer.concat(chunks, bytes).toString('utf8');
    } catch (err) {
      if (err instanceof LeaseholdError) throw err;
      throw unavailable(`${what}: response failed: ${describe(err, timeoutMs)}`, err);
    }
    let body: unknown;
    try {
      body = text.length === 0 ? undefined : JSON.parse(text);
    } catch (err) {
      throw unavailable(`${what}: unparsable reply (status ${res.statusCode})`, err);
    }
    return { status: res.statusCode, headers: res.headers, body };
  }

  /** Close the keep-alive connections. */
  async close(): Promise<void> {
    await this.#agent.close();
  }
}

function unavailable(message: string, cause: unknown): LeaseholdError {
  return new LeaseholdError('UNAVAILABLE', message, { cause, retryable: true });
}

function describe(err: unknown, timeoutMs: number): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) {
    return `no reply within ${timeoutMs} ms`;
  }
  const code = (err as { code?: unknown }).code;
  const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${err instanceof Error ? err.message : String(err)}${typeof code === 'string' ? ` (${code})` : ''}${cause}`;
}
