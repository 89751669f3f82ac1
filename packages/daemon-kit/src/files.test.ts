import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writePortFile } from './port-file.js';
import { readTlsFiles } from './tls-files.js';

const dir = mkdtempSync(join(tmpdir(), 'leasehold-kit-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('files main.ts reads and writes', () => {
  it('readTlsFiles reads the certificate, the key and a CA only when named, through the reader given', () => {
    const read = (path: string) => Buffer.from(`pem of ${path}`);
    expect(readTlsFiles({ certFile: '/c', keyFile: '/k' }, read)).toEqual({ cert: read('/c'), key: read('/k') });
    expect(readTlsFiles({ certFile: '/c', keyFile: '/k', caFile: '/ca' }, read).ca).toEqual(read('/ca'));
  });

  it('writePortFile writes the port and leaves no temp file', () => {
    const path = join(dir, 'port');
    writePortFile(path, 7400, 1);
    writePortFile(path, 7401, 1);
    expect(readFileSync(path, 'utf8')).toBe('7401\n');
    expect(readdirSync(dir)).toEqual(['port']);
  });
});
