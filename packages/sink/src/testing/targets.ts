/**
 * Adapters that present each sink implementation as a {@link ContractTarget}: the in-process
 * service, the HTTP app through `inject`, and the HTTP client against a listening server.
 */
import {
  LeaseholdError,
  parseFence,
  parseToken,
  ResourcePageQuerySchema,
  type AdvanceDecision,
  type Decision,
  type ErrorMessage,
  type JsonValue,
  type ResourceView,
  type WriteBatchResponse,
  type WriteDecision,
} from '@leasehold/protocol';
import pino from 'pino';
import type { SinkClient } from '@leasehold/sink-client';
import type { FencedService } from '../service/fenced-service.js';
import { createSink, type Sink } from '../sink.js';
import type { FenceStore } from '../store/port.js';
import { SqliteFenceStore } from '../store/sqlite-store.js';
import {
  readWholeResource,
  type ContractDecision,
  type ContractOptions,
  type ContractPage,
  type ContractPageQuery,
  type ContractTarget,
  type ContractWrite,
} from './contract.js';
import { COORDINATOR_KEY, INCARNATION, recordBatches, sign, tempDir, testOptions } from './fixtures.js';

/** The query as the wire carries it (strings), so every target parses it with the route's decoder. */
function wireQuery(query: ContractPageQuery): Record<string, string> {
  const wire: Record<string, string> = {};
  if (query.after !== undefined) wire.after = query.after;
  if (query.limit !== undefined) wire.limit = String(query.limit);
  return wire;
}

export function serviceTarget(service: FencedService, extra: Partial<ContractTarget> = {}): ContractTarget {
  const resourcePage = async (resource: string, query: ContractPageQuery = {}): Promise<ContractPage> => {
    const parsed = ResourcePageQuerySchema.safeParse(wireQuery(query));
    if (!parsed.success) throw new LeaseholdError('INVALID_MESSAGE', parsed.error.message);
    const page = await service.resourcePage(resource, { after: BigInt(parsed.data.after), limit: parsed.data.limit });
    return {
      fence: page.fence,
      results: page.results.map((r) => ({
        resultId: r.resultId,
        token: r.token,
        workerId: r.workerId,
        payload: JSON.parse(r.payload) as JsonValue,
      })),
      next: page.next.toString(),
      hasMore: page.hasMore,
    };
  };
  return {
    kind: 'service',
    advance: (resource, token) => service.advance({ resource, token }),
    advanceBatch: (items) => service.advanceBatch(items),
    write: (w) => service.write(w),
    resourcePage,
    resource: (resource) => readWholeResource(resourcePage, resource),
    decisions: async (after, limit) => {
      const page = await service.decisionPage(after, limit);
      return { ...page, decisions: page.decisions };
    },
    close: () => service.close(),
    ...extra,
  };
}

/** A sink (SQLite in a temp dir unless `openStore` gives another store; batch sizes recorded) not listening; for inject tests. */
export async function openInjectSink(
  overrides: Parameters<typeof testOptions>[1] = {},
  openStore?: () => Promise<FenceStore>,
): Promise<{ sink: Sink; sizes: number[]; cleanup: () => Promise<void> }> {
  const dir = tempDir();
  const options = testOptions(dir.file('sink.db'), overrides);
  const recorded = recordBatches(
    openStore === undefined ? new SqliteFenceStore({ path: options.dbPath }) : await openStore(),
  );
  const sink = await createSink(options, {
    listen: false,
    store: recorded.store,
    processMetrics: false,
    logger: pino({ level: 'silent' }),
  });
  return {
    sink,
    sizes: recorded.sizes,
    cleanup: async () => {
      await sink.close();
      dir.remove();
    },
  };
}

/** A sink (SQLite in a temp dir) listening on a free loopback port; for raw-socket tests. */
export async function openListeningSink(
  overrides: Parameters<typeof testOptions>[1] = {},
): Promise<{ sink: Sink; port: number; cleanup: () => Promise<void> }> {
  const dir = tempDir();
  const sink = await createSink(testOptions(dir.file('sink.db'), overrides), {
    processMetrics: false,
    logger: pino({ level: 'silent' }),
  });
  return {
    sink,
    port: sink.address?.port ?? 0,
    cleanup: async () => {
      await sink.close();
      dir.remove();
    },
  };
}

function fromWireDecision(d: Decision): ContractDecision {
  return {
    seq: d.seq,
    kind: d.kind,
    resource: d.resource,
    token: parseToken(d.token),
    fenceBefore: parseFence(d.fenceBefore),
    outcome: d.outcome,
    resultId: d.resultId,
  };
}

/** The HTTP app through fastify `inject` (no socket), over SQLite or the store `openStore` gives. */
export async function injectTarget(
  options: ContractOptions = {},
  openStore?: () => Promise<FenceStore>,
): Promise<ContractTarget> {
  const { sink, sizes, cleanup } = await openInjectSink(
    options.readPageMaxBytes === undefined ? {} : { readPageMaxBytes: options.readPageMaxBytes },
    openStore,
  );
  const auth = { authorization: `Bearer ${COORDINATOR_KEY}` };
  const post = async (url: string, payload: unknown, withAuth: boolean) => {
    const res = await sink.app.inject({
      method: 'POST',
      url,
      payload: payload as object,
      headers: withAuth ? auth : {},
    });
    return { status: res.statusCode, body: res.json<unknown>() };
  };
  const refusal = (body: unknown) => {
    const e = body as ErrorMessage;
    return { ok: false as const, code: e.code, fence: parseFence(e.fence ?? 'missing') };
  };
  const resourcePage = async (resource: string, query: ContractPageQuery = {}): Promise<ContractPage> => {
    const search = new URLSearchParams(wireQuery(query)).toString();
    const url = `/v1/resources/${encodeURIComponent(resource)}${search === '' ? '' : `?${search}`}`;
    const res = await sink.app.inject({ url, headers: auth });
    if (res.statusCode !== 200) {
      const e = res.json<ErrorMessage>();
      throw Object.assign(new LeaseholdError(e.code, e.message), { status: res.statusCode });
    }
    const view = res.json<ResourceView>();
    return {
      fence: parseFence(view.fence),
      results: view.results.map((r) => ({ ...r, token: parseToken(r.token) })).map(stripResult),
      next: view.next,
      hasMore: view.hasMore,
      bodyBytes: res.rawPayload.length,
    };
  };
  return {
    kind: 'http',
    advance: async (resource, token) => {
      const { status, body } = await post('/v1/fences/advance', { resource, token: String(token) }, true);
      if (status === 409) return refusal(body) as AdvanceDecision;
      const ok = body as { outcome: 'advanced' | 'unchanged'; fence: string };
      return { ok: true, outcome: ok.outcome, fence: parseFence(ok.fence) };
    },
    advanceBatch: async (items) => {
      const wire = { items: items.map((i) => ({ resource: i.resource, token: String(i.token) })) };
      const { body } = await post('/v1/fences/advance-batch', wire, true);
      return (body as { results: { ok: boolean; outcome?: string; code?: string; fence: string }[] }).results.map(
        (r) =>
          (r.ok
            ? { ok: true, outcome: r.outcome, fence: parseFence(r.fence) }
            : { ok: false, code: r.code, fence: parseFence(r.fence) }) as AdvanceDecision,
      );
    },
    write: async (w) => {
      const { status, body } = await post('/v1/writes', wireWrite(w), false);
      if (status === 409) return refusal(body) as WriteDecision;
      if (status !== 200) throw new Error(`write failed: ${status} ${JSON.stringify(body)}`);
      const ok = body as { outcome: 'written' | 'replayed'; fence: string };
      return { ok: true, outcome: ok.outcome, fence: parseFence(ok.fence) };
    },
    writeBatch: async (writes) => {
      const { status, body } = await post('/v1/writes/batch', { items: writes.map(wireWrite) }, false);
      if (status !== 200) throw new Error(`batch write failed: ${status} ${JSON.stringify(body)}`);
      return (body as WriteBatchResponse).results.map((r): WriteDecision => {
        if (r.ok) return { ok: true, outcome: r.outcome, fence: parseFence(r.fence) };
        if (r.code !== 'STALE_TOKEN' && r.code !== 'FENCE_CONFLICT' && r.code !== 'RESULT_CONFLICT') {
          throw new Error(`batch item failed: ${JSON.stringify(r)}`);
        }
        return { ok: false, code: r.code, fence: parseFence(r.fence ?? 'missing') };
      });
    },
    resourcePage,
    resource: (resource) => readWholeResource(resourcePage, resource),
    decisions: async (after, limit) => {
      const res = await sink.app.inject({ url: `/v1/decisions?after=${after}&limit=${limit}`, headers: auth });
      const page = res.json<{ decisions: Decision[]; next: number; oldestRetained: number }>();
      return { ...page, decisions: page.decisions.map(fromWireDecision) };
    },
    batchSizes: () => sizes,
    close: cleanup,
  };
}

/** A contract write as the wire carries it, signed by the test capability key. */
function wireWrite(w: ContractWrite) {
  return {
    resource: w.resource,
    token: String(w.token),
    resultId: w.resultId,
    workerId: w.workerId,
    incarnation: INCARNATION,
    capability: sign(w.resource, w.token, w.workerId),
    payload: w.payload,
  };
}

function stripResult(r: { resultId: string; token: bigint; workerId: string; payload: unknown }) {
  return { resultId: r.resultId, token: r.token, workerId: r.workerId, payload: r.payload as never };
}

/** The HTTP client against a listening server. */
export function clientTarget(
  client: SinkClient,
  close: () => Promise<void>,
  options: { readonly batchesWrites?: boolean } = {},
): ContractTarget {
  const resourcePage = async (resource: string, query: ContractPageQuery = {}): Promise<ContractPage> => {
    const page = await client.resourcePage(resource, {
      ...(query.after === undefined ? {} : { after: query.after }),
      ...(query.limit === undefined ? {} : { limit: query.limit }),
    });
    return { fence: page.fence, results: page.results.map(stripResult), next: page.next, hasMore: page.hasMore };
  };
  return {
    kind: 'client',
    batchesWrites: options.batchesWrites ?? true,
    advance: async (resource, token) => {
      const r = await client.advance(resource, token);
      return r.ok ? { ok: true, outcome: r.outcome, fence: r.fence } : { ok: false, code: r.code, fence: r.fence };
    },
    advanceBatch: async (items) =>
      (await client.advanceBatch(items)).map((r) =>
        r.ok ? { ok: true, outcome: r.outcome, fence: r.fence } : { ok: false, code: r.code, fence: r.fence },
      ),
    write: (w) =>
      client.write({
        resource: w.resource,
        token: w.token,
        resultId: w.resultId,
        workerId: w.workerId,
        payload: w.payload,
        incarnation: INCARNATION,
        capability: sign(w.resource, w.token, w.workerId),
      }),
    resourcePage,
    // The compatible whole-resource read: the client walks every page itself.
    resource: async (resource) => {
      const view = await client.getResource(resource);
      return { fence: view.fence, results: view.results.map(stripResult) };
    },
    decisions: async (after, limit) => {
      const page = await client.decisions(after, limit);
      return { ...page, decisions: page.decisions.map(fromWireDecision) };
    },
    close,
  };
}
