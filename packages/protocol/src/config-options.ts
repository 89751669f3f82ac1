/**
 * Shared, pure handling of daemon options: every option is an environment variable
 * `<PREFIX><ENV>` and a flag `--<name>`; flags override the environment. Parsing collects every
 * problem instead of stopping at the first, so a ConfigError can list them all.
 */
export interface OptionSpec {
  /** Environment variable name without the prefix, e.g. `SINK_URL`. */
  readonly env: string;
  readonly help: string;
  /** Never logged. */
  readonly secret?: boolean;
  /** A flag without a value means `true`. */
  readonly boolean?: boolean;
}

export type OptionTable = Readonly<Record<string, OptionSpec>>;

export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/**
 * Collect raw option values, keyed by `spec.env`, from the environment then the flags. Flags take
 * `--name value`, `--name=value`, or a bare `--name` for boolean options. Positional arguments are
 * returned in `rest` when `allowPositional`, else reported as problems.
 */
export function collectOptions(
  table: OptionTable,
  prefix: string,
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[],
  allowPositional = false,
): { raw: Record<string, string>; problems: string[]; rest: string[] } {
  const raw: Record<string, string> = {};
  const problems: string[] = [];
  const rest: string[] = [];
  for (const spec of Object.values(table)) {
    const value = env[`${prefix}${spec.env}`];
    if (value !== undefined && value !== '') raw[spec.env] = value;
  }
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] ?? '';
    if (arg === '--help' || arg === '-h') continue;
    if (!arg.startsWith('--')) {
      if (allowPositional) rest.push(arg);
      else problems.push(`unexpected argument ${JSON.stringify(arg)}`);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    const spec = table[name];
    if (spec === undefined) {
      problems.push(`unknown flag --${name}`);
      continue;
    }
    let value: string | undefined = eq === -1 ? undefined : arg.slice(eq + 1);
    if (value === undefined) {
      const next = argv[i + 1];
      if (spec.boolean === true && (next === undefined || next.startsWith('--'))) value = 'true';
      else if (next === undefined) problems.push(`--${name} needs a value`);
      else {
        value = next;
        i += 1;
      }
    }
    if (value !== undefined) raw[spec.env] = value;
  }
  return { raw, problems, rest };
}

export function formatOptionsHelp(table: OptionTable, prefix: string): string {
  return Object.entries(table)
    .map(([flag, spec]) => `  --${flag.padEnd(26)} ${(prefix + spec.env).padEnd(42)} ${spec.help}`)
    .join('\n');
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
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}
