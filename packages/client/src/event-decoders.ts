/**
 * Decoders of the two event streams: each event's JSON validated against its protocol schema and
 * matched to its SSE `event:` name. Unknown event names are skipped (a newer server may add
 * kinds); a known name with a malformed body ends the stream with INVALID_MESSAGE.
 */
import {
  CoordinatorEventSchema,
  LeaseholdError,
  SinkEventSchema,
  type CoordinatorEvent,
  type SinkEvent,
} from '@leasehold/protocol';
import type { z } from 'zod';
import type { Decoded } from './event-stream.js';
import type { SseEvent } from './sse-parser.js';

const COORDINATOR_EVENTS = new Set(['task', 'reset']);
const SINK_EVENTS = new Set(['decision', 'refusal', 'reset']);

function decodeJson<S extends z.ZodType>(event: SseEvent, schema: S, peer: string): z.infer<S> {
  let json: unknown;
  try {
    json = JSON.parse(event.data);
  } catch (err) {
    throw new LeaseholdError('INVALID_MESSAGE', `${peer} event ${event.event}: not JSON`, {
      cause: err,
      retryable: false,
    });
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new LeaseholdError('INVALID_MESSAGE', `${peer} event ${event.event}: ${parsed.error.message}`, {
      retryable: false,
    });
  }
  const value = parsed.data as { type: string };
  if (value.type !== event.event) {
    throw new LeaseholdError('INVALID_MESSAGE', `${peer} event ${event.event} carries a ${value.type}`, {
      retryable: false,
    });
  }
  return parsed.data;
}

/**
 * A coordinator event. A `reset` carries no id but says where the stream continues (`revision`):
 * the cursor moves to just before it, so a later reconnect does not ask for the lost range again.
 */
export function decodeCoordinatorEvent(event: SseEvent): Decoded<CoordinatorEvent> | undefined {
  if (!COORDINATOR_EVENTS.has(event.event)) return undefined;
  const value = decodeJson(event, CoordinatorEventSchema, 'coordinator');
  if (value.type === 'reset') {
    const from = BigInt(value.revision);
    return from > 0n ? { value, cursor: (from - 1n).toString() } : { value };
  }
  return { value };
}

/** A sink event (its `reset` has an `id:` of its own: the cursor follows it). */
export function decodeSinkEvent(event: SseEvent): Decoded<SinkEvent> | undefined {
  if (!SINK_EVENTS.has(event.event)) return undefined;
  return { value: decodeJson(event, SinkEventSchema, 'sink') };
}
