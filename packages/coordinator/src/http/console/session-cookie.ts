/**
 * The web console's session cookie: stateless, signed with the admin key that logged in.
 *
 *   lh_console = v1.<expiresAtMs>.<nonce>.<base64url HMAC-SHA256(adminKey, "leasehold-console|v1|<expiresAtMs>|<nonce>")>
 *
 * - Issued by `POST /ui/api/login` for a correct admin key; sent back as `HttpOnly; SameSite=Strict;
 *   Path=/ui` (and `Secure` over TLS), so page scripts cannot read it and no other site's page can
 *   make the browser send it.
 * - Verified against every configured admin key (constant-time compare of the MAC), so it survives a
 *   coordinator restart, works on every coordinator with the same `ADMIN_KEYS`, and dies when the
 *   key that signed it is removed from `ADMIN_KEYS` (rotation revokes console sessions too).
 * - It expires at `expiresAtMs` (wall clock). Logging out revokes it: its nonce is the session's
 *   id, recorded as revoked in etcd for every coordinator (console-revocations.ts) until it would
 *   have expired anyway. The cookie is never logged, and the admin key never leaves the login
 *   request.
 * - Decoded strictly, one spelling per value (like capabilities): the expiry in decimal without
 *   leading zeros (and a safe integer), the nonce exactly 16 base64url characters (12 bytes, no
 *   spare bits), the MAC exactly the canonical unpadded base64url of 32 bytes (the last character
 *   carries 4 bits; its 2 spare bits must be zero). Anything else is no session.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const CONSOLE_COOKIE = 'lh_console';
/** How long a console login lasts. */
export const CONSOLE_SESSION_MS = 8 * 60 * 60 * 1_000;

const PREFIX = 'v1';

function mac(key: string, expiresAtMs: number, nonce: string): Buffer {
  return createHmac('sha256', key).update(`leasehold-console|${PREFIX}|${expiresAtMs}|${nonce}`).digest();
}

/** A cookie value for a login with `key` at `nowMs`. */
export function issueConsoleSession(key: string, nowMs: number, ttlMs = CONSOLE_SESSION_MS): string {
  const expiresAtMs = nowMs + ttlMs;
  const nonce = randomBytes(12).toString('base64url');
  return `${PREFIX}.${expiresAtMs}.${nonce}.${mac(key, expiresAtMs, nonce).toString('base64url')}`;
}

/** A console login, as its cookie says (after the MAC was checked). */
export interface ConsoleSession {
  /** The cookie's nonce: names this login (revocation is by this id). */
  readonly id: string;
  readonly expiresAtMs: number;
}

/** Decimal, no leading zero (an expiry is never 0). */
const EXPIRY = /^[1-9][0-9]{0,15}$/;
/** 12 random bytes: exactly 16 base64url characters, every bit used. */
const NONCE = /^[A-Za-z0-9_-]{16}$/;
/** base64url of 32 bytes, unpadded: 42 free characters and a last one whose low 2 bits are zero. */
const CANONICAL_MAC = /^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;

/**
 * The live session `value` names, when it is signed by one of `keys` (every key is tried) and
 * spelled canonically; undefined otherwise. Revocation is the caller's to check (by `id`).
 */
export function decodeConsoleSession(
  value: string | undefined,
  keys: readonly string[],
  nowMs: number,
): ConsoleSession | undefined {
  if (value === undefined || value.length > 200) return undefined;
  const parts = value.split('.');
  if (parts.length !== 4 || parts[0] !== PREFIX) return undefined;
  const [, expText = '', nonce = '', sig = ''] = parts;
  if (!EXPIRY.test(expText) || !NONCE.test(nonce) || !CANONICAL_MAC.test(sig)) return undefined;
  const expiresAtMs = Number(expText);
  if (!Number.isSafeInteger(expiresAtMs)) return undefined;
  const given = Buffer.from(sig, 'base64url');
  let ok = false;
  for (const key of keys) {
    // No early exit: the time does not tell which key (or whether any) matched.
    if (timingSafeEqual(mac(key, expiresAtMs, nonce), given)) ok = true;
  }
  return ok && expiresAtMs > nowMs ? { id: nonce, expiresAtMs } : undefined;
}

/** The value of cookie `name` in a `Cookie` header (the first one wins). */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    if (part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/** A `Set-Cookie` value for the session (or, with `value` empty, one that clears it). */
export function sessionCookieHeader(value: string, options: { secure: boolean; maxAgeMs: number }): string {
  const attrs = [
    `${CONSOLE_COOKIE}=${value}`,
    'Path=/ui',
    'HttpOnly',
    'SameSite=Strict',
    `Max-Age=${Math.max(0, Math.floor(options.maxAgeMs / 1_000))}`,
  ];
  if (options.secure) attrs.push('Secure');
  return attrs.join('; ');
}
