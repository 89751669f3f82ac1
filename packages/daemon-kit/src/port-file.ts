import { renameSync, writeFileSync } from 'node:fs';

/** Write the bound port to `path` atomically (a temp file renamed), so a reader never sees half a number. */
export function writePortFile(path: string, port: number, pid: number = process.pid): void {
  const tmp = `${path}.${pid}.tmp`;
  writeFileSync(tmp, `${port}\n`);
  renameSync(tmp, path);
}
