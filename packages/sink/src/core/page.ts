/**
 * Page bounds of the sink's reads (pure): every page is bounded by count AND by bytes.
 *
 * A store reads the sizes of the next `limit + 1` candidates first (ids and payload lengths, no
 * payload), asks {@link pageLength} how many of them one page takes, then reads only those. Rules:
 * - at most `limit` entries (0 = none: the page carries only its envelope, e.g. the fence);
 * - their serialised sizes sum to at most `maxBytes`;
 * - but the first entry always comes, however large: a reader always makes progress, and an entry
 *   larger than the budget is a page of its own.
 *
 * The sizes are upper bounds of what the HTTP route serialises (`JSON.stringify` of the wire
 * shape): identifiers are ASCII (ids.ts in @leasehold/protocol), a stored payload is canonical JSON
 * whose UTF-8 length is exactly what is sent, and the fixed parts are counted at their widest.
 */

export interface PageBounds {
  /** Most entries a page may hold (>= 0). */
  readonly limit: number;
  /** Most bytes the entries of a page may add up to (the page's envelope is not included). */
  readonly maxBytes: number;
}

/**
 * Bytes of a StoredResult besides its ids and payload, at their widest:
 * `{"resource":"","resultId":"","token":"<19 digits>","workerId":"","payload":,"writtenAtMs":<16 digits>}`
 * is 115 bytes, plus the comma between array elements; rounded up.
 */
export const RESULT_JSON_OVERHEAD_BYTES = 128;

/**
 * Bytes of a page around its results, at their widest: `{"resource":"<200>","fence":"<19>",
 * "results":[],"next":"<19>","hasMore":false}` is under 320; rounded up.
 */
export const RESULT_PAGE_ENVELOPE_BYTES = 512;

/**
 * Bytes of one decision-log entry besides its ids, at their widest (`seq` 16 digits, kind, token
 * and fenceBefore 19 digits each, outcome `RESULT_CONFLICT`, atMs 16 digits, every key present).
 */
export const DECISION_JSON_OVERHEAD_BYTES = 256;

/** Bytes of a decision page around its entries (`{"decisions":[],"next":..,"oldestRetained":..}`). */
export const DECISION_PAGE_ENVELOPE_BYTES = 128;

/** Upper bound of the JSON bytes of one stored result, from its ids' and payload's lengths. */
export function resultJsonBytes(idBytes: number, payloadBytes: number): number {
  return RESULT_JSON_OVERHEAD_BYTES + idBytes + payloadBytes;
}

/** Upper bound of the JSON bytes of one decision, from the summed length of its ids. */
export function decisionJsonBytes(idBytes: number): number {
  return DECISION_JSON_OVERHEAD_BYTES + idBytes;
}

/** How many of the candidates (their sizes, in page order) one page takes. */
export function pageLength(sizes: readonly number[], bounds: PageBounds): number {
  let taken = 0;
  let bytes = 0;
  for (const size of sizes) {
    if (taken >= bounds.limit) break;
    if (taken > 0 && bytes + size > bounds.maxBytes) break;
    bytes += size;
    taken++;
  }
  return taken;
}
