/** Builders of coordinator -> worker frames that carry no decision of their own. */
import { ERROR_CODE_INFO, type ErrorCode, type ErrorMessage } from '@leasehold/protocol';

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
