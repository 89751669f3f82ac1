import { describe, expect, it } from 'vitest';
import { LeaseholdError, SchemaVersionError } from './errors.js';

describe('SchemaVersionError', () => {
  it('is a final INTERNAL refusal that names the version it found', () => {
    const err = new SchemaVersionError('schema 7 is newer than this build supports', 7);
    expect(err).toBeInstanceOf(LeaseholdError);
    expect(err.code).toBe('INTERNAL');
    expect(err.retryable).toBe(false); // retrying cannot make an older build read a newer schema
    expect(err.foundVersion).toBe(7);
  });
});
