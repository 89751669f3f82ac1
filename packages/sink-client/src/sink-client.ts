/**
 * Typed HTTP(S) client of the sink (undici keep-alive pool; TLS with CA pinning via `tls`).
 *
 * - Expected refusals (409 STALE_TOKEN / FENCE_CONFLICT / RESULT_CONFLICT) come back as data:
 *   `{ ok: false, code, fence }`. Tokens and fences are bigints.
 * - Transport failures and 5xx throw LeaseholdError('UNAVAILABLE' / 'SHUTTING_DOWN', retryable).
 * - Other refusals (400, 401, 403, 413, 404 on a route) throw LeaseholdError with the body's code.
 * - Reads are paged and bounded: `resourcePage` (one page, at most 1000 results within the sink's
 *   page byte budget), `resourcePages` (an async iterator over every page), `getFence` (no
 *   results at all); every reply is read up to `maxResponseBytes`.
 *
 * - Writes are group-committed (`writeBatching`, on by default): the writes of one event-loop turn,
 *   and those made while a batch request is in flight, leave together as one `POST
 *   /v1/writes/batch` (within `maxItems` and `maxBytes`); each caller still gets its own write's
 *   answer, exactly as `POST /v1/writes` would give it. A sink without the batch route (404) is
 *   written one request per write from then on; a batch refused as too large (413) goes again one
 *   request per write. Both refusals come before any decision, and a write sent twice is a replay.
 *
 * Tracing (`@opentelemetry/api`; no-ops unless the process registered an SDK): a write is a
 * `leasehold.sink.write` client span, an advance a `leasehold.fence.advance` one, children of the
 * active context; each request carries its span as the W3C `traceparent` header (a batched write
 * in its item), so the sink's span is its child.
 */
import {
  AdvanceBatchResponseSchema,
  AdvanceResponseSchema,
  DecisionPageSchema,
  ErrorMessageSchema,
  LeaseholdError,
  ResourceViewSchema,
  StoredResultSchema,
  MAX_WRITE_BATCH_ITEMS,
  WriteBatchResponseSchema,
  WriteResponseSchema,
  formatToken,
  parseFence,
  parseToken,
  signVouch,
  type AdvanceBatchRequest,
  type CapabilitySigningKey,
  type DecisionPage,
  type JsonValue,
  type VouchedGrant,
  ProbeResponseSchema,
  type ProbeRequest,
  type ProbeResponse,
} from '@leasehold/protocol';
import { context, propagation, SpanKind, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';
import type { z } from 'zod';
import { JsonHttp, type JsonReply, type TlsClientOptions } from './http-json.js';
import { MicroBatcher, type Settled } from './micro-batcher.js';
import { sinkResourcePath, sinkResultPath } from './paths.js';

export interface SinkClientOptions {
  /** Base URL, e.g. `http://127.0.0.1:7400`. */
  readonly url: string;
  /** Bearer key: a coordinator key (advances, reads) or a read-only key. Writes need none. */
  readonly key?: string;
  /** Per-request deadline. Default 5000 ms. */
  readonly timeoutMs?: number;
  /** Keep-alive connections. Default 16. */
  readonly maxSockets?: number;
  /** For an `https://` sink: the CA to pin, and a client certificate for mTLS. */
  readonly tls?: TlsClientOptions;
  /** Longest reply read (a longer one is PAYLOAD_TOO_LARGE). Default 65 MiB: any page or result a sink sends. */
  readonly maxResponseBytes?: number;
  /** Group commit of writes into `POST /v1/writes/batch` requests (default on); `false`: one request per write. */
  readonly writeBatching?: WriteBatchingOptions | false;
}

export interface WriteBatchingOptions {
  /** Most writes in one request. Default 64 (at most the protocol's MAX_WRITE_BATCH_ITEMS, 256). */
  readonly maxItems?: number;
  /**
   * Most bytes of one request body; a write whose item alone is larger goes on its own
   * `POST /v1/writes`. Default 256 KiB (the sink's body limit is 1 MiB by default).
   */
  readonly maxBytes?: number;
  /** Batch requests in flight at once; what arrives meanwhile waits for one to return. Default 1. */
  readonly maxInFlight?: number;
}

/** Bytes of `{"items":[` and `]}`, and of the comma between two items. */
const BATCH_ENVELOPE_BYTES = 12;

/** One fence advance; `grant` (the grant it is made for) only matters with a vouch. */
export interface AdvanceArgs {
  readonly resource: string;
  readonly token: bigint;
  readonly grant?: { readonly workerId: string; readonly incarnation: string; readonly capability: string };
}

function advanceBatchBody(
  items: readonly AdvanceArgs[],
  vouchWith: CapabilitySigningKey | undefined,
): AdvanceBatchRequest {
  const grants: VouchedGrant[] = [];
  const wire = items.map((i): AdvanceBatchRequest['items'][number] => {
    const token = formatToken(i.token);
    if (vouchWith === undefined || i.grant === undefined) return { resource: i.resource, token };
    grants.push({ resource: i.resource, token: i.token, ...i.grant });
    return { resource: i.resource, token, grant: i.grant };
  });
  return vouchWith === undefined || grants.length === 0
    ? { items: wire }
    : { items: wire, vouch: signVouch(vouchWith, grants) };
}

export type AdvanceResult =
  | { readonly ok: true; readonly resource: string; readonly outcome: 'advanced' | 'unchanged'; readonly fence: bigint }
  | { readonly ok: false; readonly resource: string; readonly code: 'STALE_TOKEN'; readonly fence: bigint };

export type WriteResult =
  | { readonly ok: true; readonly outcome: 'written' | 'replayed'; readonly fence: bigint }
  | {
      readonly ok: false;
      readonly code: 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT';
      readonly fence: bigint;
    };

export interface WriteArgs {
  readonly resource: string;
  readonly token: bigint;
  readonly resultId: string;
  readonly workerId: string;
  readonly incarnation: string;
  readonly capability: string;
  readonly payload: JsonValue;
}

export interface ClientStoredResult {
  readonly resource: string;
  readonly resultId: string;
  readonly token: bigint;
  readonly workerId: string;
  readonly payload: JsonValue;
  readonly writtenAtMs: number;
}

export interface ClientResourceView {
  readonly resource: string;
  readonly fence: bigint;
  readonly results: readonly ClientStoredResult[];
}

/** One page of a resource's results (`GET /v1/resources/:resource?after=&limit=`). */
export interface ClientResourcePage extends ClientResourceView {
  /** Pass as `after` to continue after this page (the request's `after` when it is empty). */
  readonly next: string;
  /** More results existed after `next` when the page was read. */
  readonly hasMore: boolean;
}

export interface ResourcePageOptions {
  /** A previous page's `next` (default "0": from the first result). */
  readonly after?: string;
  /** At most this many results, 0..1000 (default 1000; 0 = the fence alone). */
  readonly limit?: number;
}

export interface SinkHealth {
  readonly live: boolean;
  readonly ready: boolean;
}

const WRITE_REFUSALS = new Set(['STALE_TOKEN', 'FENCE_CONFLICT', 'RESULT_CONFLICT']);

/** A page as new sinks send it; a sink from before paging sends no `next` / `hasMore` (all results). */
const ResourcePageReplySchema = ResourceViewSchema.partial({ next: true, hasMore: true });

const tracer = trace.getTracer('@leasehold/sink-client');

/** A refusal the sink decided (409): status ERROR, the code as `error.type` and as the outcome. */
function markRefused(span: Span, code: string): void {
  span.setAttributes({ 'error.type': code, 'leasehold.outcome': code.toLowerCase() });
  span.setStatus({ code: SpanStatusCode.ERROR, message: code });
}

type WriteRefusalCode = 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT';
type WireWrite = Omit<WriteArgs, 'token'> & { readonly token: string };

/** A write waiting for its batch: its item as JSON, that JSON's bytes, and what a lone request sends. */
interface BatchedWrite {
  readonly encoded: string;
  readonly bytes: number;
  readonly wire: WireWrite;
  readonly headers: Record<string, string>;
}

/** The batch item of a write: the write request, with the span's `traceparent` when tracing is on. */
function encodeItem(wire: WireWrite, headers: Record<string, string>): { encoded: string; bytes: number } {
  const traceparent = headers.traceparent;
  const encoded = JSON.stringify(traceparent === undefined ? wire : { ...wire, traceparent });
  return { encoded, bytes: Buffer.byteLength(encoded) };
}

/** The error code of a non-2xx reply, when its body is an error message. */
function errorCodeOf(reply: JsonReply): string | undefined {
  if (reply.status < 300) return undefined;
  const parsed = ErrorMessageSchema.safeParse(reply.body);
  return parsed.success ? parsed.data.code : undefined;
}

export class SinkClient {
  readonly #http: JsonHttp;
  readonly #key: string | undefined;
  readonly #batcher: MicroBatcher<BatchedWrite, WriteResult> | undefined;
  readonly #batchMaxBytes: number;
  /** The sink answered the batch route with 404: it predates it. */
  #batchUnsupported = false;

  constructor(options: SinkClientOptions) {
    this.#http = new JsonHttp({
      url: options.url,
      timeoutMs: options.timeoutMs ?? 5000,
      connections: options.maxSockets ?? 16,
      peer: 'sink',
      ...(options.tls === undefined ? {} : { tls: options.tls }),
      ...(options.maxResponseBytes === undefined ? {} : { maxResponseBytes: options.maxResponseBytes }),
    });
    this.#key = options.key;
    const batching = options.writeBatching ?? {};
    this.#batchMaxBytes = batching === false ? 0 : Math.max(1024, batching.maxBytes ?? 256 * 1024);
    this.#batcher =
      batching === false
        ? undefined
        : new MicroBatcher<BatchedWrite, WriteResult>(
            (items) => this.#writeBatch(items),
            Math.min(MAX_WRITE_BATCH_ITEMS, Math.max(1, batching.maxItems ?? 64)),
            { maxInFlight: batching.maxInFlight ?? 1 },
          );
  }

  advance(resource: string, token: bigint): Promise<AdvanceResult> {
    const attributes = { 'leasehold.resource': resource, 'leasehold.token': formatToken(token) };
    return this.#traced('leasehold.fence.advance', '/v1/fences/advance', attributes, async (headers, span) => {
      const reply = await this.#post('/v1/fences/advance', { resource, token: formatToken(token) }, true, headers);
      if (reply.status === 409) {
        const refusal = this.#refusal(reply, new Set(['STALE_TOKEN']));
        markRefused(span, 'STALE_TOKEN');
        return { ok: false, resource, code: 'STALE_TOKEN', fence: refusal.fence };
      }
      const body = this.#expect(reply, AdvanceResponseSchema);
      span.setAttributes({ 'leasehold.outcome': body.outcome, 'leasehold.fence': body.fence });
      return { ok: true, resource, outcome: body.outcome, fence: parseFence(body.fence) };
    });
  }

  /**
   * Advance many fences in one durable commit. With `vouchWith` (the coordinator's capability
   * signing key), the items that name their `grant` are sent with it and the request carries a
   * vouch over those grants (`signVouch`): the sink then accepts each of those capabilities for its
   * claims without verifying it again. A sink older than vouches refuses such a request with
   * INVALID_MESSAGE before anything is advanced; without `vouchWith`, grants are not sent.
   */
  advanceBatch(
    items: readonly AdvanceArgs[],
    options: { readonly vouchWith?: CapabilitySigningKey } = {},
  ): Promise<AdvanceResult[]> {
    const [only] = items;
    const attributes: Attributes = {
      'leasehold.advance_count': items.length,
      ...(items.length === 1 && only !== undefined
        ? { 'leasehold.resource': only.resource, 'leasehold.token': formatToken(only.token) }
        : {}),
    };
    const path = '/v1/fences/advance-batch';
    return this.#traced('leasehold.fence.advance', path, attributes, async (headers) => {
      const wire = advanceBatchBody(items, options.vouchWith);
      const body = this.#expect(await this.#post(path, wire, true, headers), AdvanceBatchResponseSchema);
      return body.results.map((r): AdvanceResult =>
        r.ok
          ? { ok: true, resource: r.resource, outcome: r.outcome, fence: parseFence(r.fence) }
          : { ok: false, resource: r.resource, code: r.code, fence: parseFence(r.fence) },
      );
    });
  }

  write(args: WriteArgs): Promise<WriteResult> {
    const attributes = {
      'leasehold.resource': args.resource,
      'leasehold.token': formatToken(args.token),
      'leasehold.result_id': args.resultId,
      'leasehold.worker_id': args.workerId,
    };
    return this.#traced('leasehold.sink.write', '/v1/writes', attributes, async (headers, span) => {
      const wire = { ...args, token: formatToken(args.token) };
      let result: WriteResult;
      const encoded = this.#batcher === undefined || this.#batchUnsupported ? undefined : encodeItem(wire, headers);
      if (this.#batcher !== undefined && encoded !== undefined && encoded.bytes <= this.#batchMaxBytes) {
        span.setAttribute('url.path', '/v1/writes/batch');
        result = await this.#batcher.submit({ ...encoded, wire, headers });
      } else {
        result = await this.#writeOne(wire, headers);
      }
      if (result.ok) {
        span.setAttributes({ 'leasehold.outcome': result.outcome, 'leasehold.fence': formatToken(result.fence) });
      } else {
        markRefused(span, result.code);
        span.setAttribute('leasehold.fence', formatToken(result.fence));
      }
      return result;
    });
  }

  /** One write on `POST /v1/writes`. */
  async #writeOne(wire: WireWrite, headers: Record<string, string>): Promise<WriteResult> {
    const reply = await this.#post('/v1/writes', wire, false, headers);
    if (reply.status === 409) {
      const { code, fence } = this.#refusal(reply, WRITE_REFUSALS);
      return { ok: false, code: code as WriteRefusalCode, fence };
    }
    const body = this.#expect(reply, WriteResponseSchema);
    return { ok: true, outcome: body.outcome, fence: parseFence(body.fence) };
  }

  /** The writes the batcher gathered: requests of at most `maxBytes`, each item answered on its own. */
  async #writeBatch(items: readonly BatchedWrite[]): Promise<Settled<WriteResult>[]> {
    const requests: BatchedWrite[][] = [];
    let current: BatchedWrite[] = [];
    let bytes = BATCH_ENVELOPE_BYTES;
    for (const item of items) {
      if (current.length > 0 && bytes + item.bytes + 1 > this.#batchMaxBytes) {
        requests.push(current);
        current = [];
        bytes = BATCH_ENVELOPE_BYTES;
      }
      current.push(item);
      bytes += item.bytes + 1;
    }
    requests.push(current);
    // A request that failed fails its own writes only: the others' answers (durable writes) stand.
    const answers = await Promise.all(
      requests.map((request) =>
        this.#sendBatch(request).catch((error: unknown) =>
          request.map((): Settled<WriteResult> => ({ ok: false, error })),
        ),
      ),
    );
    return answers.flat();
  }

  async #sendBatch(items: readonly BatchedWrite[]): Promise<Settled<WriteResult>[]> {
    if (this.#batchUnsupported) return this.#eachAlone(items);
    const rawBody = `{"items":[${items.map((i) => i.encoded).join(',')}]}`;
    const reply = await this.#http.request({ method: 'POST', path: '/v1/writes/batch', rawBody });
    const code = errorCodeOf(reply);
    if (reply.status === 404 && code === 'NOT_FOUND') {
      // A sink from before the batch route: it decided nothing; write one request per write from now on.
      this.#batchUnsupported = true;
      return this.#eachAlone(items);
    }
    // Too large for this sink's body limit: refused before any decision; each goes alone.
    if (reply.status === 413 && items.length > 1) return this.#eachAlone(items);
    const body = this.#expect(reply, WriteBatchResponseSchema);
    if (body.results.length !== items.length) {
      throw new LeaseholdError('UNAVAILABLE', 'malformed reply from the sink: wrong number of results', {
        retryable: true,
      });
    }
    return body.results.map((r): Settled<WriteResult> => {
      if (r.ok) return { ok: true, value: { ok: true, outcome: r.outcome, fence: parseFence(r.fence) } };
      if (WRITE_REFUSALS.has(r.code) && r.fence !== undefined) {
        return { ok: true, value: { ok: false, code: r.code as WriteRefusalCode, fence: parseFence(r.fence) } };
      }
      return { ok: false, error: new LeaseholdError(r.code, `sink: ${r.message}`, { retryable: r.retryable }) };
    });
  }

  #eachAlone(items: readonly BatchedWrite[]): Promise<Settled<WriteResult>[]> {
    return Promise.all(
      items.map(async (i): Promise<Settled<WriteResult>> => {
        try {
          return { ok: true, value: await this.#writeOne(i.wire, i.headers) };
        } catch (error) {
          return { ok: false, error };
        }
      }),
    );
  }

  /**
   * A client span around one request: `headers` carry it as `traceparent` (empty when tracing is
   * off); a thrown failure is recorded (exception event, status ERROR) and rethrown.
   */
  async #traced<T>(
    name: string,
    path: string,
    attributes: Attributes,
    run: (headers: Record<string, string>, span: Span) => Promise<T>,
  ): Promise<T> {
    const span = tracer.startSpan(name, {
      kind: SpanKind.CLIENT,
      attributes: { ...attributes, 'http.request.method': 'POST', 'url.path': path },
    });
    const headers: Record<string, string> = {};
    propagation.inject(trace.setSpan(context.active(), span), headers);
    try {
      return await run(headers, span);
    } catch (err) {
      span.recordException(err instanceof Error ? err : String(err));
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
      if (err instanceof LeaseholdError) span.setAttribute('error.type', err.code);
      throw err;
    } finally {
      span.end();
    }
  }

  /**
   * One page of a resource's results, in the order they were stored, with the fence as of this
   * page. A sink from before paging answers with every result and no cursor: that is one last page.
   */
  async resourcePage(resource: string, options: ResourcePageOptions = {}): Promise<ClientResourcePage> {
    const query = new URLSearchParams();
    if (options.after !== undefined) query.set('after', options.after);
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    const search = query.toString();
    const reply = await this.#get(`${sinkResourcePath(resource)}${search === '' ? '' : `?${search}`}`);
    const body = this.#expect(reply, ResourcePageReplySchema);
    return {
      resource: body.resource,
      fence: parseFence(body.fence),
      results: body.results.map(toClientResult),
      next: body.next ?? options.after ?? '0',
      hasMore: body.hasMore ?? false,
    };
  }

  /**
   * Every page of a resource's results, from `options.after` (default the first) to the last,
   * fetched one at a time as the loop asks: results stored during the walk come in later pages,
   * each result exactly once.
   */
  async *resourcePages(resource: string, options: ResourcePageOptions = {}): AsyncGenerator<ClientResourcePage> {
    let page = await this.resourcePage(resource, options);
    yield page;
    while (page.hasMore) {
      page = await this.resourcePage(resource, { ...options, after: page.next });
      yield page;
    }
  }

  /** The fence of a resource (0n if never advanced), without reading any result. */
  async getFence(resource: string): Promise<bigint> {
    return (await this.resourcePage(resource, { limit: 0 })).fence;
  }

  /**
   * Every result of a resource in one array, and the fence of the last page: a walk over
   * {@link resourcePages}, so it holds all of them in memory. Kept for callers from before paging;
   * prefer `resourcePages`, `getFence` or `getResult`.
   */
  async getResource(resource: string): Promise<ClientResourceView> {
    const results: ClientStoredResult[] = [];
    let fence = 0n;
    for await (const page of this.resourcePages(resource)) {
      results.push(...page.results);
      fence = page.fence;
    }
    return { resource, fence, results };
  }

  /** The stored result, or undefined if there is none. */
  async getResult(resource: string, resultId: string): Promise<ClientStoredResult | undefined> {
    const reply = await this.#get(sinkResultPath(resource, resultId));
    if (reply.status === 404) return undefined;
    return toClientResult(this.#expect(reply, StoredResultSchema));
  }

  /** One page of the decision log (wire form: tokens stay decimal strings). */
  async decisions(after = 0, limit = 100): Promise<DecisionPage> {
    return this.#expect(await this.#get(`/v1/decisions?after=${after}&limit=${limit}`), DecisionPageSchema);
  }

  /**
   * The coordinator's readiness probe: proves the coordinator key (401 otherwise: thrown as
   * UNAUTHENTICATED) and asks whether the sink would accept `capability` over `claims`.
   */
  async probe(request: ProbeRequest): Promise<ProbeResponse> {
    return this.#expect(await this.#post('/v1/probe', request, true), ProbeResponseSchema);
  }

  /** Liveness and readiness; never throws for a reachable sink. */
  async health(): Promise<SinkHealth> {
    const live = await this.#send({ method: 'GET', path: '/healthz' });
    const ready = await this.#send({ method: 'GET', path: '/readyz' });
    return { live: live.status === 200, ready: ready.status === 200 };
  }

  /** Close the keep-alive connections. */
  close(): Promise<void> {
    return this.#http.close();
  }

  #post(path: string, body: unknown, withKey: boolean, headers?: Record<string, string>): Promise<JsonReply> {
    return this.#send({
      method: 'POST',
      path,
      body,
      bearer: withKey ? this.#key : undefined,
      ...(headers === undefined ? {} : { headers }),
    });
  }

  #get(path: string): Promise<JsonReply> {
    return this.#send({ method: 'GET', path, bearer: this.#key });
  }

  #send(req: {
    method: 'GET' | 'POST';
    path: string;
    body?: unknown;
    bearer?: string | undefined;
    headers?: Record<string, string>;
  }): Promise<JsonReply> {
    return this.#http.request(req);
  }

  #refusal(reply: JsonReply, allowed: ReadonlySet<string>): { code: string; fence: bigint } {
    const parsed = ErrorMessageSchema.safeParse(reply.body);
    if (!parsed.success || !allowed.has(parsed.data.code) || parsed.data.fence === undefined) {
      throw new LeaseholdError('UNAVAILABLE', `unexpected 409 reply from the sink`, { retryable: true });
    }
    return { code: parsed.data.code, fence: parseFence(parsed.data.fence) };
  }

  /** The body of a 200 reply, or throw the error the sink sent. */
  #expect<S extends z.ZodType>(reply: JsonReply, schema: S): z.infer<S> {
    if (reply.status === 200) {
      const parsed = schema.safeParse(reply.body);
      if (parsed.success) return parsed.data;
      throw new LeaseholdError('UNAVAILABLE', 'malformed reply from the sink', { retryable: true });
    }
    const error = ErrorMessageSchema.safeParse(reply.body);
    if (error.success) {
      throw new LeaseholdError(error.data.code, `sink: ${error.data.message}`, { retryable: error.data.retryable });
    }
    throw new LeaseholdError('UNAVAILABLE', `sink replied ${reply.status}`, { retryable: reply.status >= 500 });
  }
}

function toClientResult(r: z.infer<typeof StoredResultSchema>): ClientStoredResult {
  return {
    resource: r.resource,
    resultId: r.resultId,
    token: parseToken(r.token),
    workerId: r.workerId,
    payload: r.payload,
    writtenAtMs: r.writtenAtMs,
  };
}
