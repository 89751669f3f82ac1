/** Ids nobody can guess, valid under the protocol's id rule (request ids are scoped to the session). */
import { randomFillSync } from 'node:crypto';

/**
 * Random bytes drawn from the CSPRNG 4 KiB at a time and handed out 16 at a time, each used once:
 * `randomBytes(16)` per id cost ~5.8 µs (an OpenSSL call and a buffer each), the pooled draw
 * ~0.2 µs, and every acquire takes one. The bytes are as unguessable as `randomBytes`'s (the same
 * generator); only the number of calls into it changes.
 */
const POOL = Buffer.alloc(4096);
let offset = POOL.length;

/**
 * 128 random bits in base64url: its alphabet (A-Z a-z 0-9 - _) is inside the id alphabet and can
 * never make the `..` or `//` the id rule forbids (an earlier `_` -> `.` mapping could, 1 in ~200).
 */
export function unguessableId(): string {
  if (offset + 16 > POOL.length) {
    randomFillSync(POOL);
    offset = 0;
  }
  const id = POOL.toString('base64url', offset, offset + 16);
  offset += 16;
  return id;
}
