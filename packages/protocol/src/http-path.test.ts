import { describe, expect, it } from 'vitest';
import { normalizePath } from './http-path.js';

describe('normalizePath', () => {
  it.each([
    ['/v1/tasks', '/v1/tasks'],
    ['//v1///tasks', '/v1/tasks'],
    ['/a/../v1/./tasks', '/v1/tasks'],
    ['/v1/%2e%2e/v1/tasks', '/v1/tasks'],
    ['/v1/%2E/tasks', '/v1/tasks'],
    ['/v1/tasks?x=1', '/v1/tasks?x=1'],
    ['/v1/tasks?x=1#f', '/v1/tasks?x=1'],
    ['/v1/tasks#f?x', '/v1/tasks'],
    ['/v1/tasks/a%2Fb', '/v1/tasks/a%2Fb'],
    ['/../../etc/passwd', '/etc/passwd'],
    ['/%761/tasks', '/%761/tasks'],
  ])('%s -> %s', (input, output) => {
    expect(normalizePath(input)).toBe(output);
  });
});
