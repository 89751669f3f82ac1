// `pnpm bench` entry (scripts/bench.sh builds first): the suites are TypeScript in bench/src,
// compiled to bench/dist. See bench/README.md and docs/benchmarks.md.
await import('./dist/run.js');
