#!/usr/bin/env node
// Re-vendors the JSON Schemas that test/deploy validates the deploy files against, into
// test/deploy/schemas/ (see its README.md for what and why). Run by hand when bumping a version;
// the tests never fetch anything. Needs the npm registry (`npm pack`) and tar.
//
//   node scripts/vendor-deploy-schemas.mjs
//
// - Kubernetes: generated from the models of @kubernetes/client-node (themselves generated from the
//   Kubernetes OpenAPI spec of the release named below): every property with its type, the
//   required ones, and `additionalProperties: false` on every object (the strict mode of
//   kubeconform / yannh's "-strict" schemas: an unknown or misspelt field is an error). Only the
//   kinds in KINDS and the definitions they reach.
// - Compose: the Compose Specification's schema (compose-spec/compose-spec, schema/compose-spec.json)
//   as shipped, byte for byte, in the npm package named below.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLIENT_NODE = '@kubernetes/client-node@2.0.1';
const COMPOSE_SPEC_PACKAGE = 'dclint@3.1.0';
const COMPOSE_SPEC_PATH = 'schemas/compose.schema.json';
/** apiVersion, kind, the client-node model. Add a kind here when deploy/k8s starts using it. */
const KINDS = [
  ['v1', 'Namespace', 'V1Namespace'],
  ['v1', 'Service', 'V1Service'],
  ['apps/v1', 'Deployment', 'V1Deployment'],
  ['apps/v1', 'StatefulSet', 'V1StatefulSet'],
  ['policy/v1', 'PodDisruptionBudget', 'V1PodDisruptionBudget'],
];

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outDir = join(root, 'test', 'deploy', 'schemas');
const work = mkdtempSync(join(tmpdir(), 'leasehold-schemas-'));

function unpack(spec) {
  const [info] = JSON.parse(execFileSync('npm', ['pack', '--json', spec], { cwd: work, encoding: 'utf8' }));
  const dir = join(work, info.filename.replace(/\.tgz$/, ''));
  mkdirSync(dir);
  execFileSync('tar', ['xzf', join(work, info.filename), '-C', dir]);
  return { dir: join(dir, 'package'), integrity: info.integrity };
}

try {
  mkdirSync(outDir, { recursive: true });

  // --- Kubernetes -------------------------------------------------------------------------------
  const client = unpack(CLIENT_NODE);
  const models = join(client.dir, 'dist', 'gen', 'models');
  const release = /OpenAPI spec version: (\S+)/.exec(readFileSync(join(models, 'V1Pod.js'), 'utf8'))?.[1];
  const definitions = {};
  const pending = KINDS.map(([, , model]) => model);

  const typeSchema = (type, format, owner) => {
    if (type === 'string') return { type: 'string' };
    if (type === 'boolean') return { type: 'boolean' };
    if (type === 'number') return { type: format.startsWith('int') ? 'integer' : 'number' };
    if (type === 'Date') return { type: 'string' };
    if (type === 'IntOrString') return { type: ['string', 'integer'] };
    if (type === 'any' || type === 'object') return {};
    let m = /^Array<(.+)>$/.exec(type);
    if (m) return { type: 'array', items: typeSchema(m[1], '', owner) };
    m = /^\{ \[key: string\]: (.+); \}$/.exec(type);
    if (m) return { type: 'object', additionalProperties: typeSchema(m[1], '', owner) };
    if (existsSync(join(models, `${type}.js`))) {
      pending.push(type);
      return { $ref: `#/definitions/${type}` };
    }
    throw new Error(`${owner}: unknown type ${type}`);
  };

  while (pending.length > 0) {
    const name = pending.pop();
    if (definitions[name] !== undefined) continue;
    definitions[name] = {}; // reserve (cycles)
    const { [name]: model } = await import(join(models, `${name}.js`));
    const dts = readFileSync(join(models, `${name}.d.ts`), 'utf8');
    const required = [...dts.matchAll(/^ {4}'([^']+)': /gm)].map((m) => m[1]);
    const properties = {};
    const requiredJson = [];
    for (const a of model.attributeTypeMap) {
      // Quantities (resources) are strings in the models; Kubernetes takes numbers too.
      let schema = typeSchema(a.type, a.format, name);
      if (/ResourceRequirements$/.test(name) && (a.name === 'limits' || a.name === 'requests')) {
        schema = { type: 'object', additionalProperties: { type: ['string', 'number'] } };
      }
      properties[a.baseName] = schema;
      if (required.includes(a.name)) requiredJson.push(a.baseName);
    }
    definitions[name] = {
      type: 'object',
      properties,
      ...(requiredJson.length > 0 ? { required: requiredJson } : {}),
      additionalProperties: false,
    };
  }
  const sorted = Object.fromEntries(
    Object.keys(definitions)
      .sort()
      .map((k) => [k, definitions[k]]),
  );
  const kinds = Object.fromEntries(
    KINDS.map(([apiVersion, kind, model]) => [
      `${apiVersion}/${kind}`,
      {
        type: 'object',
        allOf: [{ $ref: `#/definitions/${model}` }],
        properties: {
          apiVersion: { type: 'string', const: apiVersion },
          kind: { type: 'string', const: kind },
          metadata: { type: 'object' },
        },
        required: ['apiVersion', 'kind', 'metadata'],
      },
    ]),
  );
  const k8s = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    $comment: `Generated by scripts/vendor-deploy-schemas.mjs from ${CLIENT_NODE} (${client.integrity}), models of the Kubernetes OpenAPI spec ${release}. Strict: additionalProperties false on every object.`,
    kinds,
    definitions: sorted,
  };
  writeFileSync(join(outDir, 'kubernetes.json'), `${JSON.stringify(k8s, null, 1)}\n`);

  // --- Compose ----------------------------------------------------------------------------------
  const compose = unpack(COMPOSE_SPEC_PACKAGE);
  copyFileSync(join(compose.dir, COMPOSE_SPEC_PATH), join(outDir, 'compose-spec.json'));

  const sha = (f) =>
    createHash('sha256')
      .update(readFileSync(join(outDir, f)))
      .digest('hex');
  writeFileSync(
    join(outDir, 'versions.json'),
    `${JSON.stringify(
      {
        kubernetes: {
          from: CLIENT_NODE,
          integrity: client.integrity,
          openapi: release,
          kinds: KINDS.map((k) => `${k[0]}/${k[1]}`),
          sha256: sha('kubernetes.json'),
        },
        compose: {
          from: `${COMPOSE_SPEC_PACKAGE} ${COMPOSE_SPEC_PATH}`,
          integrity: compose.integrity,
          sha256: sha('compose-spec.json'),
        },
      },
      null,
      2,
    )}\n`,
  );
  console.log(
    `vendored into ${outDir}: kubernetes.json (${Object.keys(sorted).length} definitions, ${release}), compose-spec.json`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
