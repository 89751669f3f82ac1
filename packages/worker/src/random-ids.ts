/** Ids nobody can guess, valid under the protocol's id rule (request ids are scoped to the session). */
import { randomBytes } from 'node:crypto';

/**
 * 128 random bits in base64url: its alphabet (A-Z a-z 0-9 - _) is inside the id alphabet and can
 * never make the `..` or `//` the id rule forbids (an earlier `_` -> `.` mapping could, 1 in ~200).
 */
export function unguessableId(): string {
  return randomBytes(16).toString('base64url');
}
