import { describe, expect, it } from 'vitest';
import { ERROR_CODE_INFO, ERROR_CODES, ErrorCode, httpStatusOf, isErrorCode, isRetryableCode } from './error-codes.js';
import { LeaseholdError } from './errors.js';

describe('error codes', () => {
  it('every code maps to itself and has an HTTP status', () => {
    for (const code of ERROR_CODES) {
      expect(ErrorCode[code]).toBe(code);
      expect(ERROR_CODE_INFO[code].httpStatus).toBeGreaterThanOrEqual(400);
    }
  });

  it('follows the house HTTP mapping', () => {
    expect(httpStatusOf('INVALID_MESSAGE')).toBe(400);
    expect(httpStatusOf('UNAUTHENTICATED')).toBe(401);
    expect(httpStatusOf('FORBIDDEN')).toBe(403);
    expect(httpStatusOf('STALE_TOKEN')).toBe(409);
    expect(httpStatusOf('PAYLOAD_TOO_LARGE')).toBe(413);
    expect(httpStatusOf('UNAVAILABLE')).toBe(503);
    expect(httpStatusOf('LIMIT_REACHED')).toBe(429);
    expect(isRetryableCode('LIMIT_REACHED')).toBe(true);
  });

  it('marks fencing refusals as not retryable and unavailability as retryable', () => {
    expect(isRetryableCode('STALE_TOKEN')).toBe(false);
    expect(isRetryableCode('RESULT_CONFLICT')).toBe(false);
    expect(isRetryableCode('UNAVAILABLE')).toBe(true);
  });

  it('recognises codes and builds typed errors with a cause', () => {
    expect(isErrorCode('STALE_TOKEN')).toBe(true);
    expect(isErrorCode('toString')).toBe(false);
    const cause = new Error('boom');
    const err = new LeaseholdError('UNAVAILABLE', 'etcd down', { cause });
    expect(err).toMatchObject({ name: 'LeaseholdError', code: 'UNAVAILABLE', retryable: true, cause });
  });
});
