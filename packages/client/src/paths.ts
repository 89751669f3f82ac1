/**
 * The coordinator's paths that carry ids, as this client builds them: each id is one
 * percent-encoded segment (`/` included), so the coordinator's router hands its handler the id
 * itself. Every id the protocol accepts round-trips this way (see ids.ts in @leasehold/protocol,
 * and `ids-addressable.test.ts` in the coordinator, which sends these paths to the real router).
 */

const segment = encodeURIComponent;

/** `GET` / `DELETE /v1/tasks/:taskId` */
export function taskPath(taskId: string): string {
  return `/v1/tasks/${segment(taskId)}`;
}

/** `POST /v1/tasks/:taskId/retry` */
export function taskRetryPath(taskId: string): string {
  return `${taskPath(taskId)}/retry`;
}

/** `GET /v1/resources/:resource` (who holds it, the coordinator's view) */
export function resourceOwnerPath(resource: string): string {
  return `/v1/resources/${segment(resource)}`;
}
