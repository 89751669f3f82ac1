/**
 * Server-sent events framing (WHATWG HTML, "Server-sent events"): `id:`, `event:` and one `data:`
 * line per event, a blank line after it. Our data is JSON, which never contains a raw newline,
 * so one `data:` line always suffices; a value with a line break is refused (a broken invariant).
 */

export interface SseFrame {
  /** Omitted for events that must not move the client's Last-Event-ID (ephemeral ones). */
  readonly id?: number | string;
  readonly event: string;
  readonly data: string;
}

const LINE_BREAK = /[\r\n]/;

export function formatSseEvent(frame: SseFrame): string {
  const id = frame.id === undefined ? '' : String(frame.id);
  if (LINE_BREAK.test(id) || LINE_BREAK.test(frame.event) || LINE_BREAK.test(frame.data)) {
    throw new Error('SSE fields must not contain line breaks');
  }
  return `${frame.id === undefined ? '' : `id: ${id}\n`}event: ${frame.event}\ndata: ${frame.data}\n\n`;
}

/** A comment line: ignored by clients, keeps proxies and idle timers from closing the stream. */
export function formatSseComment(text: string): string {
  if (LINE_BREAK.test(text)) throw new Error('SSE comments must not contain line breaks');
  return `: ${text}\n\n`;
}
