/**
 * Option declarations both daemons have, declared once here and placed in each daemon's config
 * tree (`defineConfig` in @leasehold/protocol): where the server listens and whether it may serve
 * plaintext, the log level, the JSON depth limit and options that were removed. Each comes with the
 * checks that belong to it.
 */
import { check, option, type CheckDeclaration } from '@leasehold/protocol';
import { z } from 'zod';
import { bool, int, logLevel, optionalText } from './config-schemas.js';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

export interface ServerOptionsSpec {
  /** `7500` (coordinator), `7400` (sink). */
  readonly defaultPort: string;
  /** What TLS serves, for the help: `HTTPS / WSS`, `HTTPS`. */
  readonly serves: string;
}

/** host, port, port file, TLS certificate and key, insecure plaintext — and their rules. */
export function serverOptions(spec: ServerOptionsSpec) {
  const options = {
    host: option({ env: 'HOST', help: 'listen address', default: '127.0.0.1', schema: z.string().min(1) }),
    port: option({
      env: 'PORT',
      help: 'listen port; 0 = any free port',
      default: spec.defaultPort,
      schema: int(0, 65_535),
    }),
    portFile: option({
      env: 'PORT_FILE',
      help: 'write the bound port to this file once listening',
      schema: optionalText,
    }),
    tlsCert: option({
      env: 'TLS_CERT',
      help: `serve ${spec.serves} with this certificate file (PEM); reloaded on SIGHUP`,
      schema: optionalText,
    }),
    tlsKey: option({ env: 'TLS_KEY', help: 'its private key file (PEM)', schema: optionalText }),
    insecurePlaintext: option({
      env: 'INSECURE_PLAINTEXT',
      help: 'serve plain HTTP on a non-loopback address (keys cross the network in clear)',
      boolean: true,
      default: 'false',
      schema: bool,
    }),
  };
  const checks: readonly CheckDeclaration[] = [
    check({ cert: options.tlsCert, key: options.tlsKey }, ({ cert, key }, { prefix }) =>
      (cert === undefined) === (key === undefined) ? undefined : `${prefix}TLS_CERT / TLS_KEY: give both or neither`,
    ),
    check(
      { host: options.host, cert: options.tlsCert, plaintext: options.insecurePlaintext },
      ({ host, cert, plaintext }, { prefix }) =>
        cert !== undefined || plaintext || LOOPBACK.test(host)
          ? undefined
          : `${prefix}HOST: ${host} is not a loopback address: serve TLS (TLS_CERT, TLS_KEY) or set ` +
            `${prefix}INSECURE_PLAINTEXT=true to send keys in clear`,
    ),
  ];
  return { options, checks };
}

export const logLevelOption = option({
  env: 'LOG_LEVEL',
  help: 'fatal|error|warn|info|debug|trace|silent',
  default: 'info',
  schema: logLevel,
});

export const maxJsonDepthOption = option({
  env: 'MAX_JSON_DEPTH',
  help: 'deepest JSON nesting accepted in a request (a WebSocket frame, a body)',
  default: '64',
  schema: int(2, 1_000),
});

/** An option that no longer exists: listed in the help, refused with `message` when set. */
export function removedOption(env: string, help: string, message: string) {
  const removed = option({ env, help, secret: true, schema: z.string().optional() });
  return check({ removed }, (values, { where }) =>
    values.removed === undefined ? undefined : `${where(removed)}: ${message}`,
  );
}

/**
 * CAPABILITY_KEYS, the shared HMAC capability secrets removed in 0.2 (every verifier could sign with
 * them): refused with what to set instead. `use`: the flag that replaces it in this daemon.
 */
export function removedCapabilityKeys(use: string, instead: string) {
  return removedOption(
    'CAPABILITY_KEYS',
    `REMOVED in 0.2 (shared HMAC secrets): use ${use}`,
    `shared HMAC capability keys are gone (a verifier could sign with them): ${instead} (docs/security.md, Capabilities)`,
  );
}
