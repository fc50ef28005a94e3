// The benchmark client's public API, re-exported by @torchts/serve: run a benchmark, print vLLM's
// table, write the JSON record and the latency PNG, as `torchts bench serve` does.
export { benchServe, BenchArgumentError, type BenchServeOptions, type BenchServeResult } from "./bench_serve.js";
export type { GoodputSlos } from "./metrics.js";
export { latencyPlotPng } from "./plot.js";
export { formatResult, jsonRecord } from "./report.js";
export type { Endpoint } from "./request.js";
