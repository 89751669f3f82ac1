/**
 * Message dispatch decisions for one worker connection, with no socket: decode a frame, decide
 * whether the connection may handle it in its current phase, count abuse.
 *
 * - A binary frame is refused whatever it carries (a valid hello too) and the connection closed
 *   with 1003 "unsupported data": the protocol is JSON in text frames, and one decoder per message
 *   means one frame type too.
 * - A frame larger than `maxPayloadBytes` is refused with PAYLOAD_TOO_LARGE before it is parsed.
 * - Non-JSON, an unknown `type` or a schema violation is refused with INVALID_MESSAGE (with
 *   `inReplyTo` when the frame had a usable `id`).
 * - The first frame must be `hello`; a second `hello` is refused.
 * - Each refused frame counts; at `maxBadFrames` the connection is closed with 1008.
 */
import {
  DEFAULT_JSON_LIMITS,
  fastWorkerMessage,
  jsonLimitProblem,
  type JsonLimits,
  isCompatibleProtocolVersion,
  MIN_PROTOCOL_VERSION,
  PROTOCOL_VERSION,
  WORKER_MESSAGE_TYPES,
  WorkerMessageSchema,
  type ErrorMessage,
  type Hello,
  type WorkerMessage,
} from '@leasehold/protocol';
import { errorFrame } from './replies.js';

export type DecodeResult =
  { readonly ok: true; readonly message: WorkerMessage } | { readonly ok: false; readonly error: ErrorMessage };

/** WebSocket close code "unsupported data" (RFC 6455): a binary frame. */
export const CLOSE_UNSUPPORTED_DATA = 1003;
/** WebSocket close code for a policy violation (repeated bad frames). */
export const CLOSE_POLICY_VIOLATION = 1008;
/** WebSocket close code "going away": the coordinator shuts down, move to a peer. */
export const CLOSE_GOING_AWAY = 1001;
/** Application close code: incompatible protocol version. */
export const CLOSE_PROTOCOL_VERSION = 4000;
/** Application close code: the session is now served by another connection or coordinator. */
export const CLOSE_SESSION_MOVED = 4001;

const MAX_ID_ECHO = 64;

function idOf(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const id = (value as Record<string, unknown>).id;
  return typeof id === 'string' && id.length > 0 && id.length <= MAX_ID_ECHO ? id : undefined;
}

/** The answer to a binary frame: INVALID_MESSAGE, then close 1003 (its bytes are never read). */
export function refuseBinaryFrame(): { readonly error: ErrorMessage; readonly close: number } {
  return {
    error: errorFrame('INVALID_MESSAGE', 'binary frames are not accepted: send JSON in text frames'),
    close: CLOSE_UNSUPPORTED_DATA,
  };
}

/** Decode one text frame of `byteLength` bytes (JSON limits checked on the text before parsing). */
export function decodeWorkerFrame(
  text: string,
  byteLength: number,
  maxPayloadBytes: number,
  limits: JsonLimits = DEFAULT_JSON_LIMITS,
): DecodeResult {
  if (byteLength > maxPayloadBytes) {
    return {
      ok: false,
      error: errorFrame('PAYLOAD_TOO_LARGE', `frame of ${byteLength} bytes exceeds the limit of ${maxPayloadBytes}`),
    };
  }
  const tooDeep = jsonLimitProblem(text, limits);
  if (tooDeep !== undefined) return { ok: false, error: errorFrame('INVALID_MESSAGE', tooDeep) };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { ok: false, error: errorFrame('INVALID_MESSAGE', 'frame is not JSON') };
  }
  // The hot frames (acquire, release, complete, heartbeat) when certainly valid, without zod.
  const fast = fastWorkerMessage(raw);
  if (fast !== undefined) return { ok: true, message: fast };
  const inReplyTo = idOf(raw);
  const type = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>).type : undefined;
  if (typeof type !== 'string' || !(WORKER_MESSAGE_TYPES as readonly string[]).includes(type)) {
    return { ok: false, error: errorFrame('INVALID_MESSAGE', 'unknown message type', inReplyTo) };
  }
  const parsed = WorkerMessageSchema.safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    const where = first === undefined ? '' : ` at ${first.path.join('.') || '(root)'}: ${first.message}`;
    return { ok: false, error: errorFrame('INVALID_MESSAGE', `invalid ${type}${where}`, inReplyTo) };
  }
  return { ok: true, message: parsed.data };
}

export const ConnectionPhase = {
  AWAITING_HELLO: 'awaiting-hello',
  OPENING: 'opening',
  READY: 'ready',
  CLOSED: 'closed',
} as const;
export type ConnectionPhase = (typeof ConnectionPhase)[keyof typeof ConnectionPhase];

export type RouteDecision =
  | { readonly action: 'hello'; readonly hello: Hello }
  | { readonly action: 'handle'; readonly message: Exclude<WorkerMessage, Hello> }
  | { readonly action: 'refuse'; readonly error: ErrorMessage; readonly close?: number };

/** What to do with a decoded message in the connection's current phase. */
export function routeMessage(phase: ConnectionPhase, message: WorkerMessage): RouteDecision {
  if (message.type === 'hello') {
    if (phase !== ConnectionPhase.AWAITING_HELLO) {
      return { action: 'refuse', error: errorFrame('INVALID_MESSAGE', 'hello was already received', message.id) };
    }
    if (!isCompatibleProtocolVersion(message.protocolVersion)) {
      return {
        action: 'refuse',
        error: errorFrame(
          'PROTOCOL_VERSION_MISMATCH',
          `protocol version ${message.protocolVersion} is not supported (${MIN_PROTOCOL_VERSION}..${PROTOCOL_VERSION})`,
          message.id,
        ),
        close: CLOSE_PROTOCOL_VERSION,
      };
    }
    return { action: 'hello', hello: message };
  }
  if (phase !== ConnectionPhase.READY) {
    const why = phase === ConnectionPhase.OPENING ? 'the session is still opening' : 'the first frame must be hello';
    return { action: 'refuse', error: errorFrame('INVALID_MESSAGE', why, message.id) };
  }
  return { action: 'handle', message };
}

/** Counts refused frames; says when the connection must be closed. */
export class AbuseCounter {
  readonly #max: number;
  #count = 0;

  constructor(maxBadFrames: number) {
    if (!(maxBadFrames >= 1)) throw new RangeError('maxBadFrames must be >= 1');
    this.#max = maxBadFrames;
  }

  /** Record one bad frame; true when the limit is reached and the socket must close (1008). */
  record(): boolean {
    this.#count += 1;
    return this.#count >= this.#max;
  }

  get count(): number {
    return this.#count;
  }
}
