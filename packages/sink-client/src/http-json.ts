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
 *
 * The base URL's path is a prefix of every request's path (a server behind a reverse proxy at
 * `https://gateway/sink` is asked `POST /sink/v1/writes`), with or without a trailing slash. A base
 * URL that is not http(s), or carries credentials, a query or a fragment, is refused when the
 * client is made (INVALID_MESSAGE), not sent: the credentials belong in the options, and a query or
 * fragment would be dropped from every request.
 */
import { LeaseholdError } from '@leasehold/protocol';
import { Agent } from 'undici';
import type { z } from 'zod';

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
  /** Base URL, `http://` or `https://`; its path (if any) prefixes every request's path. */
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
  /** From `/`, percent-encoded (the query included): appended to the base URL's path as it is. */
  readonly path: string;
  readonly body?: unknown;
  /** The body already serialized as JSON (sent as it is; `body` is then ignored). */
  readonly rawBody?: string;
  readonly bearer?: string | undefined;
  readonly headers?: Readonly<Record<string, string>>;
  readonly timeoutMs?: number;
}

/** Where requests go: `origin` (`https://host:port`) and the path prefix of the base URL (`''` or `/sink`). */
export interface BaseUrl {
  readonly origin: string;
  readonly prefix: string;
}

/**
 * What keeps `url` from being a base for {@link JsonHttp} (undefined: nothing). It names the URL by
 * scheme, host and path at most: what else the URL carries may be secret (and `user:password@host`,
 * without a scheme, parses as scheme `user:`). For configuration checks; {@link parseBaseUrl}
 * throws it.
 */
export function baseUrlProblem(url: string): string | undefined {
  const checked = checkBaseUrl(url);
  return checked.ok ? undefined : checked.why;
}

/** For a zod schema's `superRefine`: an issue with {@link baseUrlProblem}'s message, if any. */
export function refuseUnusableBaseUrl(url: string, ctx: z.RefinementCtx): void {
  const problem = baseUrlProblem(url);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
}

/** `url` as a base for {@link JsonHttp}; a URL it cannot serve as is: INVALID_MESSAGE. */
export function parseBaseUrl(url: string, peer: string): BaseUrl {
  const checked = checkBaseUrl(url);
  if (!checked.ok) throw new LeaseholdError('INVALID_MESSAGE', `${peer} URL ${checked.why}`);
  return checked.base;
}

function checkBaseUrl(url: string): { ok: true; base: BaseUrl } | { ok: false; why: string } {
  let base: URL;
  try {
    base = new URL(url);
  } catch {
    return { ok: false, why: 'is not a URL' };
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') return { ok: false, why: 'is not http:// or https://' };
  // From here the URL is named by scheme, host and path only.
  const refuse = (why: string) => ({
    ok: false as const,
    why: `${base.protocol}//${base.host}${base.pathname}: ${why}`,
  });
  if (base.username !== '' || base.password !== '') return refuse('credentials in the URL (pass them in the options)');
  // (Checked in the text: an empty `?` or `#` leaves `search` and `hash` empty.)
  if (url.includes('?')) return refuse('a query (it would be dropped from every request)');
  if (url.includes('#')) return refuse('a fragment (it would be dropped from every request)');
  return { ok: true, base: { origin: base.origin, prefix: base.pathname.replace(/\/+$/, '') } };
}

export class JsonHttp {
  readonly base: BaseUrl;
  readonly #agent: Agent;
  readonly #o: JsonHttpOptions;

  constructor(options: JsonHttpOptions) {
    this.base = parseBaseUrl(options.url, options.peer);
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
      // The agent's own request: origin and path as they are (the paths are built encoded), no
      // URL parsed per request.
      res = await this.#agent.request({
        origin: this.base.origin,
        path: `${this.base.prefix}${req.path}`,
        method: req.method,
        headers,
        ...(payload === undefined ? {} : { body: payload }),
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
