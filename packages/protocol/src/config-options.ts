/**
 * Shared, pure handling of daemon options, declared once per option (flag name, environment name,
 * help, default, secret) with everything else derived: the help text, the environment variable
 * `<PREFIX><ENV>`, the flag `--<name>`, the config-file key `<name>`, and for secrets the
 * `<PREFIX><ENV>_FILE` variable / `<name>-file` key that reads the value from a file.
 *
 * Precedence: default < config file (`--config PATH` or `<PREFIX>CONFIG`, YAML or JSON) <
 * environment < flags. Secrets are refused as flags (argv is visible in `ps`). Parsing collects
 * every problem instead of stopping at the first, so one ConfigError can list them all. Reading
 * files is injected (`readFile`): the daemons' main.ts pass `fs.readFileSync`.
 */
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';

export interface OptionSpec {
  /** Environment variable name without the prefix, e.g. `SINK_URL`. */
  readonly env: string;
  readonly help: string;
  /** Applied when no source sets the option (shown in the help). */
  readonly default?: string;
  /** Never logged, never a flag; may come from `<PREFIX><ENV>_FILE` or `<name>-file` in the config file. */
  readonly secret?: boolean;
  /** Not secret, but may still be read from a file (`_FILE`), e.g. a URL that can carry a password. */
  readonly fromFile?: boolean;
  /** A flag without a value means `true`. */
  readonly boolean?: boolean;
}

export type OptionTable = Readonly<Record<string, OptionSpec>>;

export type OptionSource = 'default' | 'config file' | 'environment' | 'file' | 'flag';

export interface ConfigInput {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly argv: readonly string[];
  /** Reads `--config` and `*_FILE` files. Without it, naming a file is a problem. */
  readonly readFile?: (path: string) => string;
}

export interface CollectedOptions {
  /** Raw values by `spec.env`, defaults applied. */
  readonly raw: Record<string, string>;
  readonly problems: string[];
  /** Positional arguments (when allowed). */
  readonly rest: string[];
  /** Where each value came from, for messages: `LEASEHOLD_X_PORT`, `--port`, `config.yaml: port`. */
  readonly origin: Record<string, string>;
}

/** Flags every daemon understands besides its table. */
const META_FLAGS = new Set(['help', 'version', 'check-config', 'config']);

export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

export function wantsVersion(argv: readonly string[]): boolean {
  return argv.includes('--version') || argv.includes('-v');
}

/** `--check-config`: validate the configuration, print it (secrets redacted) and exit. */
export function wantsCheckConfig(argv: readonly string[]): boolean {
  return argv.includes('--check-config');
}

const readProblem = (what: string, path: string, err: unknown) =>
  `${what}: cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`;

function fileValue(text: string): string {
  return text.replace(/\r?\n$/, '');
}

function scalar(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value) && value.every((v) => typeof v === 'string' || typeof v === 'number')) {
    return value.map(String).join(',');
  }
  return undefined;
}

/**
 * Collect raw option values, keyed by `spec.env`, from defaults, the config file, the environment
 * (and `_FILE` variables) and the flags. Flags take `--name value` or `--name=value`, or a bare
 * `--name` for boolean options; `--help`, `--version`, `--check-config` and `--config PATH` are
 * understood by every daemon.
 */
export function collectOptions(
  table: OptionTable,
  prefix: string,
  input: ConfigInput,
  options: { readonly allowPositional?: boolean } = {},
): CollectedOptions {
  const raw: Record<string, string> = {};
  const origin: Record<string, string> = {};
  const problems: string[] = [];
  const set = (spec: OptionSpec, value: string, where: string) => {
    raw[spec.env] = value;
    origin[spec.env] = where;
  };
  for (const spec of Object.values(table)) if (spec.default !== undefined) set(spec, spec.default, 'default');

  // Flags first (parsed, not applied), to find --config.
  const parseOptions: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
    version: { type: 'boolean', short: 'v' },
    'check-config': { type: 'boolean' },
    config: { type: 'string' },
  };
  for (const [name, spec] of Object.entries(table)) {
    if (!META_FLAGS.has(name)) parseOptions[name] = { type: spec.boolean === true ? 'boolean' : 'string' };
  }
  // Lenient parse (every problem is reported below, not just the first), then checked token by token.
  const parsed = parseArgs({
    args: [...input.argv],
    options: parseOptions,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const flags: Record<string, string | boolean> = {};
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') continue;
    const spec = table[token.name];
    const meta = META_FLAGS.has(token.name) || token.name === 'h' || token.name === 'v';
    if (spec === undefined && !meta) {
      problems.push(`unknown flag ${token.rawName} (see --help)`);
      continue;
    }
    const wantsValue = token.name === 'config' || (spec !== undefined && spec.boolean !== true);
    if (wantsValue && (token.value === undefined || (!token.inlineValue && token.value.startsWith('--')))) {
      problems.push(`${token.rawName} needs a value`);
      continue;
    }
    if (!wantsValue && token.value !== undefined) {
      problems.push(`${token.rawName} takes no value (write --${token.name} or leave it out)`);
      continue;
    }
    flags[token.name] = token.value ?? true;
  }
  const rest = parsed.positionals;
  if (options.allowPositional !== true && rest.length > 0) {
    problems.push(`unexpected argument ${JSON.stringify(rest[0])} (see --help)`);
  }

  // The config file.
  const configPath = typeof flags.config === 'string' ? flags.config : input.env[`${prefix}CONFIG`];
  if (configPath !== undefined && configPath !== '') {
    let doc: unknown;
    try {
      if (input.readFile === undefined) throw new Error('no file reader');
      doc = parseYaml(input.readFile(configPath));
    } catch (err) {
      problems.push(readProblem('--config', configPath, err));
    }
    if (doc !== undefined && doc !== null) {
      if (typeof doc !== 'object' || Array.isArray(doc))
        problems.push(`${configPath}: must be a mapping of option: value`);
      else {
        for (const [key, value] of Object.entries(doc as Record<string, unknown>)) {
          const isFileKey = key.endsWith('-file') && table[key.slice(0, -5)] !== undefined;
          const name = isFileKey ? key.slice(0, -5) : key;
          const spec = table[name];
          if (spec === undefined) {
            problems.push(`${configPath}: unknown option ${JSON.stringify(key)}`);
            continue;
          }
          const text = scalar(value);
          if (text === undefined) {
            problems.push(`${configPath}: ${key}: must be a string, number, boolean or list`);
            continue;
          }
          if (!isFileKey) {
            set(spec, text, `${configPath}: ${key}`);
            continue;
          }
          if (spec.secret !== true && spec.fromFile !== true) {
            problems.push(`${configPath}: ${key}: ${name} is not read from a file`);
            continue;
          }
          try {
            if (input.readFile === undefined) throw new Error('no file reader');
            set(spec, fileValue(input.readFile(text)), `${configPath}: ${key} (${text})`);
          } catch (err) {
            problems.push(readProblem(`${configPath}: ${key}`, text, err));
          }
        }
      }
    }
  }

  // The environment, then `_FILE` variables.
  for (const spec of Object.values(table)) {
    const name = `${prefix}${spec.env}`;
    const value = input.env[name];
    const file = input.env[`${name}_FILE`];
    if (value !== undefined && value !== '' && file !== undefined && file !== '') {
      problems.push(`${name}_FILE: set either it or ${name}, not both`);
      continue;
    }
    if (value !== undefined && value !== '') set(spec, value, name);
    if (file === undefined || file === '') continue;
    if (spec.secret !== true && spec.fromFile !== true) {
      problems.push(`${name}_FILE: ${spec.env} is not read from a file`);
      continue;
    }
    try {
      if (input.readFile === undefined) throw new Error('no file reader');
      set(spec, fileValue(input.readFile(file)), `${name}_FILE (${file})`);
    } catch (err) {
      problems.push(readProblem(`${name}_FILE`, file, err));
    }
  }

  // The flags.
  for (const [name, value] of Object.entries(flags)) {
    if (META_FLAGS.has(name)) continue;
    const spec = table[name];
    if (spec === undefined) continue;
    if (spec.secret === true) {
      problems.push(
        `--${name}: secrets are not accepted as flags (visible in ps); use ${prefix}${spec.env}_FILE, ` +
          `${prefix}${spec.env} or the config file`,
      );
      continue;
    }
    set(spec, String(value), `--${name}`);
  }
  return { raw, problems, rest: [...rest], origin };
}

export function formatOptionsHelp(table: OptionTable, prefix: string): string {
  return Object.entries(table)
    .map(([flag, spec]) => {
      const name = spec.secret === true ? `(${prefix}${spec.env}[_FILE])` : `--${flag}`;
      const env = spec.secret === true ? '' : `${prefix}${spec.env}${spec.fromFile === true ? '[_FILE]' : ''}`;
      const def = spec.default === undefined ? '' : ` (default ${spec.default === '' ? '""' : spec.default})`;
      return `  ${name.padEnd(32)} ${env.padEnd(42)} ${spec.help}${def}`;
    })
    .join('\n');
}

/** The standard help text of a daemon: usage, every option, and the meta flags. */
export function formatHelp(title: string, command: string, table: OptionTable, prefix: string): string {
  return [
    title,
    '',
    `Usage: ${command} [--<option> <value>]... [--config FILE]`,
    '',
    `Every option is also ${prefix}<ENV> and a key of the config file (YAML or JSON: option: value).`,
    'Secrets are never flags: give them in the environment, in <ENV>_FILE (a file holding the value), or',
    'in the config file (<option>-file: PATH). Precedence: default < config file < environment < flag.',
    '',
    formatOptionsHelp(table, prefix),
    '',
    `  --config FILE                    ${`${prefix}CONFIG`.padEnd(42)} read options from a YAML or JSON file`,
    '  --check-config                   validate the configuration, print it (secrets redacted), exit',
    '  --version                        print the version and exit',
    '  --help                           print this text and exit',
  ].join('\n');
}

/** Recursively freeze a config object. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/** `a, b,,c` -> ['a','b','c'] */
export function splitList(text: string): string[] {
  return text
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** Keys that are clearly not real: the examples' placeholders, or well-known dummy words. */
const PLACEHOLDER = /replace[-_ ]?(with|me)|change[-_ ]?me|placeholder|example|^x+$|^(password|secret|test|key)\d*$/i;

/** Why `key` is not acceptable as a secret, or undefined. */
export function weakSecretProblem(key: string, minLength = 16): string | undefined {
  if (key.length < minLength) return `must be at least ${minLength} characters`;
  if (PLACEHOLDER.test(key))
    return 'is a placeholder (replace it with a random secret, e.g. `openssl rand -base64 24`)';
  if (new Set(key).size < 6) return 'is too repetitive to be a secret';
  return undefined;
}
