/**
 * The sink's paths that carry ids, as this client (and @leasehold/client) builds them: each id is
 * one percent-encoded segment (`/` included), so the sink's router hands its handler the id itself.
 * Every id the protocol accepts round-trips this way (see ids.ts in @leasehold/protocol, and
 * `ids-addressable.test.ts` in the sink, which sends these paths to the real router).
 */

/** `GET /v1/resources/:resource` */
export function sinkResourcePath(resource: string): string {
  return `/v1/resources/${encodeURIComponent(resource)}`;
}

/** `GET /v1/resources/:resource/results/:resultId` */
export function sinkResultPath(resource: string, resultId: string): string {
  return `${sinkResourcePath(resource)}/results/${encodeURIComponent(resultId)}`;
}
