/**
 * A small size-limited tmpfs for disk-full faults (root only): mount it on a directory, fill it to
 * the last byte (writes then fail with ENOSPC / SQLITE_FULL), free the space again, unmount. The
 * mount is also removed when the process exits or dies of SIGTERM / SIGINT / SIGHUP.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { onExitSync } from './processes.js';

export class SmallDisk {
  readonly dir: string;
  readonly sizeBytes: number;
  readonly #filler: string;
  #mounted = false;
  readonly #unregister: () => void;

  private constructor(dir: string, sizeBytes: number) {
    this.dir = dir;
    this.sizeBytes = sizeBytes;
    this.#filler = join(dir, '.filler');
    this.#unregister = onExitSync(() => {
      this.unmount();
    });
  }

  /** Mount a tmpfs of `sizeBytes` on `dir` (created). Throws when not root or mount fails. */
  static mount(dir: string, sizeBytes: number): SmallDisk {
    mkdirSync(dir, { recursive: true });
    const disk = new SmallDisk(dir, sizeBytes);
    const out = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes},mode=0755`, 'tmpfs', dir], {
      encoding: 'utf8',
      timeout: 10_000,
    });
    if (out.status !== 0) {
      disk.#unregister();
      throw new Error(`mount tmpfs on ${dir} failed: ${out.stderr.trim() || String(out.error)}`);
    }
    disk.#mounted = true;
    return disk;
  }

  /** Free bytes as the file system reports them. */
  freeBytes(): number {
    const s = statfsSync(this.dir);
    return s.bavail * s.bsize;
  }

  /** Write a filler file until the file system is full (ENOSPC). Returns the bytes written. */
  fill(): number {
    const fd = openSync(this.#filler, 'a');
    let written = 0;
    try {
      for (const size of [1 << 20, 64 << 10, 4 << 10, 512, 1]) {
        const chunk = Buffer.alloc(size, 0x5a);
        for (;;) {
          try {
            written += writeSync(fd, chunk);
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
            throw err;
          }
        }
      }
    } finally {
      closeSync(fd);
    }
    return written;
  }

  /** Remove the filler: the space is back. */
  free(): void {
    rmSync(this.#filler, { force: true });
  }

  /** Lazy unmount (works while a process still has files open). Idempotent. */
  unmount(): void {
    if (!this.#mounted) return;
    this.#mounted = false;
    spawnSync('umount', ['-l', this.dir], { timeout: 10_000 });
    this.#unregister();
  }
}
