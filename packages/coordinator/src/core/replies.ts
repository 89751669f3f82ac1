/** Builders of coordinator -> worker frames that carry no decision of their own, and of error replies. */
import { ERROR_CODE_INFO, LeaseholdError, type ErrorCode, type ErrorMessage } from '@leasehold/protocol';

/** The protocol's `error` frame (also the HTTP error body). */
export function errorFrame(
  code: ErrorCode,
  message: string,
  inReplyTo?: string,
  extra?: { readonly fence?: string; readonly retryable?: boolean },
): ErrorMessage {
  return {
    type: 'error',
    code,
    message,
    retryable: extra?.retryable ?? ERROR_CODE_INFO[code].retryable,
    ...(inReplyTo === undefined ? {} : { inReplyTo }),
    ...(extra?.fence === undefined ? {} : { fence: extra.fence }),
  };
}

/** A thrown failure as an `error` frame: a LeaseholdError keeps its code, anything else is INTERNAL. */
export function failureReply(err: unknown, inReplyTo: string | undefined): ErrorMessage {
  if (err instanceof LeaseholdError) return errorFrame(err.code, err.message, inReplyTo, { retryable: err.retryable });
  return errorFrame('INTERNAL', 'internal error', inReplyTo);
}
