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
 * - It expires at `expiresAtMs` (wall clock); logging out clears it in the browser. The cookie is
 *   never logged, and the admin key never leaves the login request.
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

/** Whether `value` is a live session signed by one of `keys` (every key is tried). */
export function verifyConsoleSession(value: string | undefined, keys: readonly string[], nowMs: number): boolean {
  if (value === undefined || value.length > 200) return false;
  const parts = value.split('.');
  if (parts.length !== 4 || parts[0] !== PREFIX) return false;
  const [, expText = '', nonce = '', sig = ''] = parts;
  if (!/^[0-9]{1,16}$/.test(expText) || !/^[A-Za-z0-9_-]{16}$/.test(nonce) || !/^[A-Za-z0-9_-]{43}$/.test(sig)) {
    return false;
  }
  const expiresAtMs = Number(expText);
  const given = Buffer.from(sig, 'base64url');
  let ok = false;
  for (const key of keys) {
    // No early exit: the time does not tell which key (or whether any) matched.
    if (timingSafeEqual(mac(key, expiresAtMs, nonce), given)) ok = true;
  }
  return ok && expiresAtMs > nowMs;
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
