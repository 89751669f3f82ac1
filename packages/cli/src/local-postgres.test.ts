import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { serverReady } from './local-postgres.js';

// postmaster.pid as PostgreSQL 15 writes it: pid, data dir, start time, port, socket dir, listen
// address, shared memory key, state.
function pidFile(pid: number, state: string): string {
  return [String(pid), '/data', '1796192455', '5432', '/sock', '', '  1234   5', state, ''].join('\n');
}

describe('serverReady (start-up wait of the private PostgreSQL)', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });
  function dataDirWith(content: string | undefined): string {
    dir = mkdtempSync(join(tmpdir(), 'leasehold-pgpid-'));
    if (content !== undefined) writeFileSync(join(dir, 'postmaster.pid'), content);
    return dir;
  }

  it('is ready only when the file names our server and says ready', () => {
    expect(serverReady(dataDirWith(pidFile(4242, 'ready   ')), 4242)).toBe(true);
  });
  it.each([
    ['no file yet', undefined, 4242],
    ['starting up', pidFile(4242, 'starting'), 4242],
    ['a stale file of an earlier server', pidFile(17, 'ready   '), 4242],
    ['a file cut short while written', '4242\n/data\n', 4242],
    ['our server has no pid', pidFile(4242, 'ready   '), undefined],
  ])('is not ready: %s', (_what, content, pid) => {
    expect(serverReady(dataDirWith(content), pid)).toBe(false);
  });
});
