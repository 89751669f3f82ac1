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
import type { z } from 'zod';
import { ConfigError } from './errors.js';

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

// ---------------------------------------------------------------------------------------------
// Declared once: each option is one `option({...})` placed where its value goes in the config
// object. The option table (flags, env names, help, defaults), the parsing, the config's type and
// its redacted view are all derived from that tree by `defineConfig`.
// ---------------------------------------------------------------------------------------------

const DECLARATION: unique symbol = Symbol('leasehold.config.declaration');

/** What `option()` takes: the option's spec, its parser, and optionally how the log shows it. */
export interface OptionInit<T> extends OptionSpec {
  /** Parses the raw text (`undefined` when no source set it and there is no default). */
  readonly schema: z.ZodType<T>;
  /** The value as the redacted config shows it. Default: as it is; for a secret `[redacted]` (a list: `[N redacted]`). */
  readonly redact?: (value: T) => unknown;
}

/** One option, declared once. Its place in a {@link Declarations} tree is its place in the config. */
export interface OptionDeclaration<T> extends OptionInit<T> {
  readonly [DECLARATION]: 'option';
}

/** What a derivation or a check is told besides its inputs' values. */
export interface DeclarationContext {
  /** The environment prefix, e.g. `LEASEHOLD_SINK_`. */
  readonly prefix: string;
  /** The whole environment (for switches outside the prefix). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Where an option's value came from (`--port`, `LEASEHOLD_SINK_PORT`, `config.yaml: port`), or `<PREFIX><ENV>`. */
  readonly where: <T>(option: OptionDeclaration<T>) => string;
}

/** A derivation is told the same, and may add problems to the ConfigError (its value is then never used). */
export interface DerivationContext extends DeclarationContext {
  readonly report: (problem: string) => void;
}

/** A config value computed from other declarations (options or derivations), e.g. TLS from a cert and a key. */
export interface DerivedDeclaration<T> {
  readonly [DECLARATION]: 'derived';
  readonly inputs: Declarations;
  readonly derive: (values: never, context: DerivationContext) => T;
  /** The value as the redacted config shows it. Default: as it is, or `[redacted]` when an input is a secret. */
  readonly redact?: (value: T) => unknown;
}

/** A cross-field rule (like zod's `.refine`): runs when all its inputs parsed; returns its problems. */
export interface CheckDeclaration {
  readonly [DECLARATION]: 'check';
  readonly inputs: Declarations;
  readonly check: (values: never, context: DeclarationContext) => string | undefined | readonly (string | undefined)[];
}

/** An option or a derivation, whatever its value type (the constraint of a {@link Declarations} tree). */
export interface AnyDeclaration {
  readonly [DECLARATION]: 'option' | 'derived';
}

/** A tree of declarations: its shape is the config's shape. */
export interface Declarations {
  readonly [key: string]: AnyDeclaration | Declarations;
}

/** Lists in a config are read-only. */
type Frozen<T> = T extends readonly (infer U)[] ? readonly U[] : T;

/** The config value a declaration (tree) produces. */
export type ValueOf<D> =
  D extends OptionDeclaration<infer T>
    ? Frozen<T>
    : D extends DerivedDeclaration<infer T>
      ? T
      : D extends Declarations
        ? { readonly [K in keyof D]: ValueOf<D[K]> }
        : never;

export function option<T>(init: OptionInit<T>): OptionDeclaration<T> {
  return Object.freeze({ ...init, [DECLARATION]: 'option' as const });
}

export function derived<const D extends Declarations, T>(
  inputs: D,
  derive: (values: ValueOf<D>, context: DerivationContext) => T,
  options: { readonly redact?: (value: T) => unknown } = {},
): DerivedDeclaration<T> {
  return Object.freeze({
    [DECLARATION]: 'derived' as const,
    inputs,
    derive,
    ...(options.redact === undefined ? {} : { redact: options.redact }),
  });
}

export function check<const D extends Declarations>(
  inputs: D,
  rule: (values: ValueOf<D>, context: DeclarationContext) => string | undefined | readonly (string | undefined)[],
): CheckDeclaration {
  return Object.freeze({ [DECLARATION]: 'check' as const, inputs, check: rule });
}

type Node = AnyDeclaration | Declarations;
/** An option of any value type, as the machinery handles it. */
type SomeOption = OptionSpec & {
  readonly [DECLARATION]: 'option';
  readonly schema: z.ZodType;
  readonly redact?: (value: never) => unknown;
};
type SomeDerived = Omit<DerivedDeclaration<unknown>, 'redact'> & { readonly redact?: (value: never) => unknown };

const kindOf = (node: Node): 'option' | 'derived' | 'tree' => (DECLARATION in node ? node[DECLARATION] : 'tree');

/** `SINK_URL` → `sink-url`: the flag and config-file key of an option. */
export function flagOf(env: string): string {
  return env.toLowerCase().replaceAll('_', '-');
}

export interface ConfigDefinition<D extends Declarations> {
  /** Environment prefix, e.g. `LEASEHOLD_SINK_`. */
  readonly prefix: string;
  /** The config's shape, every option placed where its value goes. */
  readonly fields: D;
  /** Cross-field rules, each run when its inputs parsed (options only they read are options too). */
  readonly checks?: readonly CheckDeclaration[];
}

export interface DefinedConfig<C> {
  readonly prefix: string;
  /** Every option by flag, in declaration order: for collectOptions, --help and the deploy-file checks. */
  readonly options: OptionTable;
  /** Resolve and validate (pure): a frozen config, or one ConfigError listing every problem. */
  readonly load: (input: ConfigInput) => C;
  /** The config with secrets replaced, for the one start-up log line and --check-config. */
  readonly redact: (config: C) => Record<string, unknown>;
}

const SECRET = '[redacted]';

function redactSecret(value: unknown): unknown {
  if (value === undefined) return undefined;
  return Array.isArray(value) ? `[${value.length} redacted]` : SECRET;
}

/**
 * Derive everything from one declaration tree: the option table (each option once; flag and
 * config-file key `flagOf(env)`), `load` (collectOptions, each option's schema, the derivations,
 * the checks — every problem in one ConfigError, the result deep-frozen) and `redact`.
 */
export function defineConfig<const D extends Declarations>(definition: ConfigDefinition<D>): DefinedConfig<ValueOf<D>> {
  const { prefix, fields } = definition;
  const checks = definition.checks ?? [];
  const options: SomeOption[] = [];
  const byEnv = new Map<string, SomeOption>();
  const seen = new Set<Node>();
  const collect = (node: Node): void => {
    if (seen.has(node)) return;
    seen.add(node);
    const kind = kindOf(node);
    if (kind === 'option') {
      const decl = node as SomeOption;
      if (byEnv.has(decl.env)) throw new Error(`config option ${decl.env} is declared twice`);
      byEnv.set(decl.env, decl);
      options.push(decl);
    } else if (kind === 'derived') collect((node as SomeDerived).inputs);
    else for (const child of Object.values(node as Declarations)) collect(child);
  };
  collect(fields);
  for (const rule of checks) collect(rule.inputs);
  const table: OptionTable = Object.freeze(
    Object.fromEntries(
      options.map((decl) => {
        const { schema: _schema, redact: _redact, [DECLARATION]: _kind, ...spec } = decl;
        return [flagOf(decl.env), Object.freeze(spec)];
      }),
    ),
  );
  const secretInputs = new Map<Node, boolean>();
  const hasSecret = (node: Node): boolean => {
    const known = secretInputs.get(node);
    if (known !== undefined) return known;
    const kind = kindOf(node);
    const secret =
      kind === 'option'
        ? (node as SomeOption).secret === true
        : kind === 'derived'
          ? hasSecret((node as SomeDerived).inputs)
          : Object.values(node as Declarations).some(hasSecret);
    secretInputs.set(node, secret);
    return secret;
  };

  const load = (input: ConfigInput): ValueOf<D> => {
    const { raw, problems, origin } = collectOptions(table, prefix, input);
    const where = (decl: { readonly env: string }) => {
      const from = origin[decl.env];
      return from === undefined || from === 'default' ? `${prefix}${decl.env}` : from;
    };
    const context: DeclarationContext = { prefix, env: input.env, where };
    const FAILED = Symbol('failed');
    const values = new Map<Node, unknown>();
    for (const decl of options) {
      const parsed = decl.schema.safeParse(raw[decl.env]);
      if (parsed.success) values.set(decl, parsed.data);
      else {
        values.set(decl, FAILED);
        for (const issue of parsed.error.issues) problems.push(`${where(decl)}: ${issue.message}`);
      }
    }
    const resolve = (node: Node): unknown => {
      if (values.has(node)) return values.get(node);
      let value: unknown;
      if (kindOf(node) === 'derived') {
        const decl = node as DerivedDeclaration<unknown>;
        const inputs = resolve(decl.inputs);
        value =
          inputs === FAILED
            ? FAILED
            : decl.derive(inputs as never, { ...context, report: (problem: string) => problems.push(problem) });
      } else {
        const entries = Object.entries(node as Declarations).map(([key, child]) => [key, resolve(child)] as const);
        value = entries.some(([, v]) => v === FAILED) ? FAILED : Object.fromEntries(entries);
      }
      values.set(node, value);
      return value;
    };
    const config = resolve(fields);
    for (const rule of checks) {
      const inputs = resolve(rule.inputs);
      if (inputs === FAILED) continue;
      const found = rule.check(inputs as never, context);
      for (const problem of typeof found === 'string' ? [found] : (found ?? [])) {
        if (problem !== undefined) problems.push(problem);
      }
    }
    if (problems.length > 0 || config === FAILED) throw new ConfigError(problems);
    return deepFreeze(config as ValueOf<D>);
  };

  const redactNode = (node: Node, value: unknown): unknown => {
    const kind = kindOf(node);
    if (kind === 'tree') {
      const tree = value as Record<string, unknown>;
      return Object.fromEntries(
        Object.entries(node as Declarations).map(([key, child]) => [key, redactNode(child, tree[key])]),
      );
    }
    const decl = node as SomeOption | SomeDerived;
    if (decl.redact !== undefined) return decl.redact(value as never);
    return hasSecret(node) ? redactSecret(value) : value;
  };

  return Object.freeze({
    prefix,
    options: table,
    load,
    redact: (config: ValueOf<D>) => redactNode(fields, config) as Record<string, unknown>,
  });
}
