/**
 * Certificate files are read in `main.ts` (through the reader it passes), never deeper: a daemon's
 * library entry takes the PEM bytes, so it does no file I/O and a test hands it bytes.
 */

/** PEM bytes of a server (or client) certificate, its key, and optionally a CA. */
export interface TlsMaterial {
  readonly cert: Buffer;
  readonly key: Buffer;
  /** A CA whose client certificates are accepted (server), or that signed the peer (client). */
  readonly ca?: Buffer;
}

export interface TlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile?: string | undefined;
}

/** Read a certificate, its key and an optional CA with `readFile` (main.ts passes `fs.readFileSync`). */
export function readTlsFiles(files: TlsFiles, readFile: (path: string) => Buffer): TlsMaterial {
  return {
    cert: readFile(files.certFile),
    key: readFile(files.keyFile),
    ...(files.caFile === undefined ? {} : { ca: readFile(files.caFile) }),
  };
}
