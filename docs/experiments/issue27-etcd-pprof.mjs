// Issue 27, nineteenth step (docs/benchmarks.md): read Go CPU profiles of etcd (see
// issue27-etcd-pprof.sh) and print the self and inclusive shares by function, and the inclusive
// share of the groups below (a sample counts once per group when any frame matches).
//
//   node docs/experiments/issue27-etcd-pprof.mjs P1.pb.gz,P2.pb.gz,… [top]
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';

// protobufjs as the coordinator's etcd client has it (coordinator → etcd3 → @grpc/proto-loader).
const along = (from, name) => createRequire(from).resolve(name);
const etcd3 = along(new URL('../../packages/coordinator/package.json', import.meta.url), 'etcd3/package.json');
const protobuf = createRequire(along(etcd3, '@grpc/proto-loader/package.json'))('protobufjs');

// github.com/google/pprof/proto/profile.proto, the fields read here.
const Profile = protobuf
  .parse(
    `syntax = "proto3";
message Profile { repeated ValueType sample_type = 1; repeated Sample sample = 2; repeated Location location = 4;
  repeated Function function = 5; repeated string string_table = 6; int64 duration_nanos = 10; }
message ValueType { int64 type = 1; int64 unit = 2; }
message Sample { repeated uint64 location_id = 1; repeated int64 value = 2; }
message Location { uint64 id = 1; repeated Line line = 4; }
message Line { uint64 function_id = 1; }
message Function { uint64 id = 1; int64 name = 2; }`,
  )
  .root.lookupType('Profile');

// [name, pattern, the group it is part of]: a sample counts in a part only when it counts in the whole.
const GRPC = /grpc\.\(\*Server\)/;
const APPLY = /applierV3|applyEntries|applyAll/;
const GROUPS = [
  ['gRPC server (request handling, unmarshal, reply)', GRPC],
  ['  of it: protobuf unmarshal', /Unmarshal/, GRPC],
  ['apply (the raft loop applying entries)', APPLY],
  ['  of it: txn compares (compareToPath)', /compareToPath/, APPLY],
  ['  of it: puts', /applierV3backend\)\.Put/, APPLY],
  ['  of it: deletes', /applierV3backend\)\.DeleteRange/, APPLY],
  ['  of it: range ops (gets in a txn)', /applierV3backend\)\.Range/, APPLY],
  ['  of it: protobuf unmarshal (stored values read)', /Unmarshal/, APPLY],
  ['raft node (proposals, ready loop)', /raftNode/],
  ['WAL (encode, write, fdatasync)', /etcd\/wal/],
  ['backend (bbolt commits)', /mvcc\/backend/],
  ['watch (events to the coordinator)', /serverWatchStream|watchableStore|syncWatchers/],
  ['lessor', /lessor/],
  ['garbage collector', /gcBgMarkWorker|gcDrain|gcAssist|markroot|sweepone|bgsweep/],
  ['malloc (inclusive)', /mallocgc/],
];

const [files, topArg] = process.argv.slice(2);
if (files === undefined) throw new Error('usage: issue27-etcd-pprof.mjs P1.pb.gz,P2.pb.gz,… [top]');
const top = Number(topArg ?? 25);
const samples = [];
let durationNs = 0;
for (const file of files.split(',')) {
  const p = Profile.toObject(Profile.decode(gunzipSync(readFileSync(file))), { longs: Number });
  const str = p.stringTable;
  const fn = new Map(p.function.map((f) => [f.id, str[f.name]]));
  const loc = new Map(p.location.map((l) => [l.id, (l.line ?? []).map((ln) => fn.get(ln.functionId))]));
  const cpu = p.sampleType.findIndex((t) => str[t.type] === 'cpu');
  durationNs += p.durationNanos;
  for (const s of p.sample) {
    samples.push({ ns: s.value[cpu], frames: s.locationId.flatMap((id) => loc.get(id) ?? ['?']) });
  }
}
const total = samples.reduce((a, s) => a + s.ns, 0);
const pct = (ns) => `${((100 * ns) / total).toFixed(1).padStart(5)} %`;
console.log(`${(total / 1e9).toFixed(2)} s of CPU in ${(durationNs / 1e9).toFixed(1)} s profiled`);
const self = new Map();
const inclusive = new Map();
for (const s of samples) {
  self.set(s.frames[0], (self.get(s.frames[0]) ?? 0) + s.ns);
  for (const f of new Set(s.frames)) inclusive.set(f, (inclusive.get(f) ?? 0) + s.ns);
}
const show = (title, m) => {
  console.log(`\n${title}`);
  for (const [f, ns] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(pct(ns), f);
};
show('self', self);
show('inclusive', inclusive);
console.log('\ngroups (inclusive)');
const has = (sample, rx) => sample.frames.some((f) => rx.test(f));
for (const [name, rx, whole] of GROUPS) {
  const ns = samples.filter((s) => has(s, rx) && (whole === undefined || has(s, whole))).reduce((a, s) => a + s.ns, 0);
  console.log(pct(ns), name);
}
