/**
 * The deploy files (deploy/** and docs/deploy.md) as the deploy tests read them, the services'
 * option tables (imported from the packages, so there is one source of truth), and the drift
 * check: every `LEASEHOLD_*` variable and every `--flag` the files use must be an option of the
 * service it is given to. `driftProblems` is pure over a list of files, so a test can plant a typo
 * in a copy and watch it fail.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ENV_PREFIX as COORDINATOR_PREFIX, OPTIONS as COORDINATOR_OPTIONS } from '@leasehold/coordinator';
import { ENV_PREFIX as CLI_PREFIX, OPTIONS as CLI_OPTIONS } from '@leasehold/cli/cli-options';
import { ENV_PREFIX as WORKER_PREFIX, OPTIONS as WORKER_OPTIONS } from '@leasehold/cli/worker-config';
import type { OptionTable } from '@leasehold/protocol';
import { ENV_PREFIX as SINK_PREFIX, OPTIONS as SINK_OPTIONS } from '@leasehold/sink';
import { parseAllDocuments } from 'yaml';

export const REPO_ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
export const DEPLOY_DIR = join(REPO_ROOT, 'deploy');
export const SCHEMA_DIR = join(REPO_ROOT, 'test', 'deploy', 'schemas');

/** Our three daemons, and the `leasehold` command (the etcd-rbac setup job runs it). */
export type ServiceName = 'coordinator' | 'sink' | 'worker' | 'cli';

export interface ServiceOptions {
  readonly name: ServiceName;
  /** The installed command (`leasehold-sink`). */
  readonly bin: string;
  /** `LEASEHOLD_SINK_`. */
  readonly prefix: string;
  readonly options: OptionTable;
}

export const SERVICES: readonly ServiceOptions[] = [
  { name: 'coordinator', bin: 'leasehold-coordinator', prefix: COORDINATOR_PREFIX, options: COORDINATOR_OPTIONS },
  { name: 'sink', bin: 'leasehold-sink', prefix: SINK_PREFIX, options: SINK_OPTIONS },
  { name: 'worker', bin: 'leasehold-worker', prefix: WORKER_PREFIX, options: WORKER_OPTIONS },
  // Last: its prefix `LEASEHOLD_` is every other's prefix too.
  { name: 'cli', bin: 'leasehold', prefix: CLI_PREFIX, options: CLI_OPTIONS },
];

/** A container or service running the `leasehold` command (a one-shot job), by its entrypoint/command. */
export function isCliJob(argv: readonly string[]): boolean {
  return argv[0] === 'leasehold';
}

/** Flags every daemon takes besides its table (see collectOptions in @leasehold/protocol). */
const META_FLAGS = new Set(['config', 'check-config', 'help', 'version']);

export function serviceByName(name: ServiceName): ServiceOptions {
  const s = SERVICES.find((x) => x.name === name);
  if (s === undefined) throw new Error(name);
  return s;
}

/** The service an image, command or target names (`leasehold-sink`, `…/leasehold-sink@sha256:…`). */
export function serviceOf(text: string): ServiceName | undefined {
  const m = /leasehold-(coordinator|sink|worker)\b/.exec(text);
  return m === null ? undefined : (m[1] as ServiceName);
}

export interface DeployFile {
  /** Relative to the repository root, e.g. `deploy/compose.yaml`. */
  readonly path: string;
  readonly text: string;
}

/** deploy/** (text files) and docs/deploy.md. */
export function readDeployFiles(): DeployFile[] {
  const out: DeployFile[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) {
        // Generated secrets (git-ignored) are not deploy files.
        if (name !== 'secrets') walk(full);
      } else out.push({ path: relative(REPO_ROOT, full), text: readFileSync(full, 'utf8') });
    }
  };
  walk(DEPLOY_DIR);
  out.push({ path: 'docs/deploy.md', text: readFileSync(join(REPO_ROOT, 'docs', 'deploy.md'), 'utf8') });
  return out;
}

/** What an environment variable name means, or the problem with it. */
export function resolveEnvName(
  name: string,
): { service: ServiceOptions; option: string; file: boolean } | { problem: string } | { meta: true } {
  const service = SERVICES.find((s) => name.startsWith(s.prefix));
  if (service === undefined) return { problem: `${name}: not a LEASEHOLD_ name` };
  const rest = name.slice(service.prefix.length);
  if (rest === 'CONFIG') return { meta: true };
  for (const [flag, spec] of Object.entries(service.options)) {
    if (rest === spec.env) return { service, option: flag, file: false };
    if (rest === `${spec.env}_FILE`) {
      if (spec.secret === true || spec.fromFile === true) return { service, option: flag, file: true };
      return { problem: `${name}: ${service.prefix}${spec.env} is not read from a file (no _FILE variant)` };
    }
  }
  return { problem: `${name}: no such ${service.name} option (see ${service.bin} --help)` };
}

/** Problems with the flags given to one service's command. */
export function flagProblems(service: ServiceName, flags: readonly string[], where: string): string[] {
  const s = serviceByName(service);
  const problems: string[] = [];
  for (const raw of flags) {
    const flag = raw.replace(/^--/, '').replace(/=.*$/, '');
    if (META_FLAGS.has(flag)) continue;
    const spec = s.options[flag];
    if (spec === undefined) problems.push(`${where}: ${s.bin} has no flag --${flag}`);
    else if (spec.secret === true) problems.push(`${where}: --${flag} is a secret; secrets are never flags`);
  }
  return problems;
}

/** A command given to one of our services somewhere in a deploy file. */
export interface Invocation {
  readonly service: ServiceName;
  readonly args: readonly string[];
  readonly where: string;
}

/** `--flag` tokens of a command line (shell-ish: stops at a comment or a pipe). */
function flagsOfLine(line: string): string[] {
  const cut = line.split(/\s(?:#|\||&&|;)\s?/)[0] ?? '';
  return [...cut.matchAll(/(?:^|[\s"'[,])(--[a-z][a-z0-9-]*)/g)].map((m) => m[1] ?? '');
}

/** Commands written out in text: `leasehold-sink --store postgres \` (continuations joined). */
function textInvocations(file: DeployFile): Invocation[] {
  const out: Invocation[] = [];
  const lines = file.text.replace(/\\\n/g, ' ').split('\n');
  lines.forEach((line, i) => {
    for (const m of line.matchAll(/\bleasehold (?:etcd-rbac|cluster up)(?=\s+--)/g)) {
      out.push({
        service: 'cli',
        args: flagsOfLine(line.slice(m.index + m[0].length)),
        where: `${file.path}:${i + 1}`,
      });
    }
    for (const m of line.matchAll(/\bleasehold-(coordinator|sink|worker)\b(?![@.\w/-])/g)) {
      const after = line.slice(m.index + m[0].length);
      // Only a command position: the binary followed by its arguments (not prose naming it).
      if (!/^\s+--/.test(after)) continue;
      out.push({ service: m[1] as ServiceName, args: flagsOfLine(after), where: `${file.path}:${i + 1}` });
    }
  });
  return out;
}

/** Dockerfile stages: ENTRYPOINT decides the service, CMD carries default flags. */
function dockerfileInvocations(file: DeployFile): Invocation[] {
  const out: Invocation[] = [];
  for (const stage of file.text.split(/^FROM\s/m).slice(1)) {
    const entry = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(stage);
    if (entry === null) continue;
    const argv = JSON.parse(entry[1] ?? '[]') as string[];
    const service = serviceOf(argv.join(' '));
    if (service === undefined) continue;
    const cmd = /^CMD\s+(\[.*\])\s*$/m.exec(stage);
    const args = [...argv.slice(1), ...(cmd === null ? [] : (JSON.parse(cmd[1] ?? '[]') as string[]))];
    out.push({
      service,
      args: args.filter((a) => a.startsWith('--')),
      where: `${file.path} (${stage.split('\n')[0]})`,
    });
  }
  return out;
}

type Yaml = Record<string, unknown>;
const isMap = (v: unknown): v is Yaml => typeof v === 'object' && v !== null && !Array.isArray(v);
/** A scalar as text ('' for anything else). */
export const text = (v: unknown): string =>
  typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : '';
const strings = (v: unknown): string[] =>
  Array.isArray(v) ? v.map(String) : typeof v === 'string' ? v.split(/\s+/).filter(Boolean) : [];

/** Parse every YAML document of a file (merge keys on, as Compose does); throws on any error. */
export function parseYamlDocuments(file: DeployFile): unknown[] {
  return parseAllDocuments(file.text, { merge: true }).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${file.path}: ${doc.errors.map((e) => e.message).join('; ')}`);
    return doc.toJS({ maxAliasCount: 1000 }) as unknown;
  });
}

/** An environment block (a map, or a list of `K=V` / `{name, value}`) as [name, value] pairs. */
export function envEntries(env: unknown): [string, string | undefined][] {
  if (isMap(env)) return Object.entries(env).map(([k, v]) => [k, v === null || v === undefined ? undefined : text(v)]);
  if (!Array.isArray(env)) return [];
  return env.map((e): [string, string | undefined] => {
    if (isMap(e)) return [text(e.name), e.value === undefined ? undefined : text(e.value)];
    const entry = text(e);
    const eq = entry.indexOf('=');
    return eq < 0 ? [entry, undefined] : [entry.slice(0, eq), entry.slice(eq + 1)];
  });
}

/** Containers of our services in Compose files and Kubernetes manifests: image/command -> args and env. */
export interface ContainerUse {
  readonly service: ServiceName;
  readonly args: readonly string[];
  readonly env: readonly [string, string | undefined][];
  readonly where: string;
}

export function containerUses(file: DeployFile): ContainerUse[] {
  if (!/\.ya?ml$/.test(file.path)) return [];
  const out: ContainerUse[] = [];
  for (const doc of parseYamlDocuments(file)) {
    if (!isMap(doc)) continue;
    // Compose: services.<name>.{image | build.target, command, environment}.
    if (isMap(doc.services)) {
      for (const [name, svc] of Object.entries(doc.services)) {
        if (!isMap(svc)) continue;
        const build = isMap(svc.build) ? text(svc.build.target) : '';
        const entry = strings(svc.entrypoint);
        const service = isCliJob(entry) ? 'cli' : serviceOf(`${text(svc.image)} ${build} ${entry.join(' ')}`);
        if (service === undefined) continue;
        out.push({
          service,
          // A flag's value is not a flag; the job's subcommand (`etcd-rbac`) is not either.
          args: [...entry.slice(1), ...strings(svc.command)].filter((a) => a.startsWith('--')),
          env: envEntries(svc.environment),
          where: `${file.path}: ${name}`,
        });
      }
    }
    // Kubernetes: every container of a pod template.
    const spec =
      isMap(doc.spec) && isMap(doc.spec.template) && isMap(doc.spec.template.spec) ? doc.spec.template.spec : {};
    const containers: unknown[] = [
      ...(Array.isArray(spec.initContainers) ? (spec.initContainers as unknown[]) : []),
      ...(Array.isArray(spec.containers) ? (spec.containers as unknown[]) : []),
    ];
    for (const c of containers) {
      if (!isMap(c)) continue;
      const command = strings(c.command);
      const service = isCliJob(command) ? 'cli' : serviceOf(`${text(c.image)} ${command.join(' ')}`);
      if (service === undefined) continue;
      const metadata = isMap(doc.metadata) ? doc.metadata : {};
      out.push({
        service,
        args: [...command.slice(1), ...strings(c.args)].filter((a) => a.startsWith('--')),
        env: envEntries(c.env),
        where: `${file.path}: ${text(doc.kind)}/${text(metadata.name)} container ${text(c.name)}`,
      });
    }
  }
  return out;
}

/** `NAME=value` assignments in text (env files, unit Environment=, shell lines, Dockerfile ENV). */
function textAssignments(text: string): string[] {
  return [...text.matchAll(/\b(LEASEHOLD_[A-Z0-9_]+)=/g)].map((m) => m[1] ?? '');
}

/**
 * Every problem of the deploy files against the option tables:
 * - a `LEASEHOLD_*` name anywhere (comments and docs included) that no service declares;
 * - a `_FILE` variant of an option that is not read from a file;
 * - a secret given inline (`LEASEHOLD_X_SECRET=` or an env entry with a value) instead of `_FILE`;
 * - a `--flag` given to a service that it does not have, or a secret as a flag;
 * - a variable of one service set on another service's container.
 */
export function driftProblems(files: readonly DeployFile[]): string[] {
  const problems: string[] = [];
  for (const file of files) {
    for (const m of file.text.matchAll(/\bLEASEHOLD_[A-Z0-9_]*[A-Z0-9]\b/g)) {
      const name = m[0];
      if (SERVICES.some((s) => `${name}_` === s.prefix)) continue; // a prefix named in prose
      const r = resolveEnvName(name);
      if ('problem' in r) problems.push(`${file.path}: ${r.problem}`);
    }
    for (const name of textAssignments(file.text)) {
      const r = resolveEnvName(name);
      if ('service' in r && !r.file && r.service.options[r.option]?.secret === true) {
        problems.push(`${file.path}: ${name}= gives a secret inline; use ${name}_FILE`);
      }
    }
    const invocations: Invocation[] = [
      ...textInvocations(file),
      ...(basename(file.path).startsWith('Dockerfile') ? dockerfileInvocations(file) : []),
    ];
    for (const use of containerUses(file)) {
      invocations.push({ service: use.service, args: use.args, where: use.where });
      for (const [name, value] of use.env) {
        const r = resolveEnvName(name);
        if (!name.startsWith('LEASEHOLD_') || 'problem' in r || 'meta' in r) continue;
        if (r.service.name !== use.service) {
          problems.push(`${use.where}: ${name} is a ${r.service.name} option, set on a ${use.service}`);
        }
        if (!r.file && r.service.options[r.option]?.secret === true && value !== undefined) {
          problems.push(`${use.where}: ${name} gives a secret inline; use ${name}_FILE`);
        }
      }
    }
    for (const inv of invocations) problems.push(...flagProblems(inv.service, inv.args, inv.where));
  }
  return problems;
}
