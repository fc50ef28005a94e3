// npm run bench [-- --quick] [-- --no-write]: runs every suite in its own process (peers bring
// their own threads and wasm flags), side by side in one run, and writes bench/RESULTS.md.
import { spawnSync } from "node:child_process";
import { cpus, totalmem, loadavg } from "node:os";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import type { Row } from "./lib.js";
import { issue18Acceptance } from "./acceptance.js";

const quick = process.argv.includes("--quick");
const write = !process.argv.includes("--no-write");
// --only=probe,small_step: run just the suites whose file names start with these (with --no-write to keep RESULTS.md)
const only = process.argv.find((a) => a.startsWith("--only="))?.slice(7).split(",");
const SMALL = "small-step"; // bench/small_step's suite name
const here = new URL(".", import.meta.url).pathname;
const root = new URL("..", import.meta.url).pathname;

interface Job {
  file: string;
  dir?: string; // under bench/ (default suites)
  args?: string[];
  env?: Record<string, string>;
  timeoutS: number;
}
const jobs: Job[] = [
  { file: "probe.ts", timeoutS: 120 },
  // issue 18's small GPT step, torchts strict/fused/compiled and PyTorch eager in one run: each runner's
  // steps in one go, then interleaved in turns of 8 steps
  { file: "small_step.ts", dir: "small_step", timeoutS: 600 },
  { file: "small_step.ts", dir: "small_step", args: ["--turn", "8"], timeoutS: 300 },
  // issue 18's other bars: ~100M Llama prefill and decode against llama.cpp (node-llama-cpp in
  // bench/transformers) at 2 threads each, and the peak wasm arena of decode and of the 6L/d384 step
  { file: "llama.ts", dir: "transformers", args: ["--threads", "2"], timeoutS: quick ? 900 : 2400 },
  { file: "memory.ts", dir: "memory", timeoutS: quick ? 900 : 1800 },
  // issue 13's serving benchmark: torchts serve vs llama.cpp (node-llama-cpp in bench/transformers), 2 threads each
  { file: "serve.ts", dir: "serve", args: write ? [] : ["--no-write"], timeoutS: quick ? 420 : 1200 },
  { file: "torchts.ts", timeoutS: 600 },
  { file: "torchts.ts", env: { TORCHTS_CPU_BACKEND: "js" }, timeoutS: 600 },
  { file: "ort.ts", timeoutS: 300 },
  { file: "tfjs.ts", timeoutS: 300 },
  { file: "jax.ts", timeoutS: 300 },
  // every mode (the issue asks for strict, fused and compiled side by side); --quick takes fewer steps
  ...(["strict", "fused", "compiled"] as const).map((m) => ({
    file: "mingpt.ts", args: [`--mode=${m}`], timeoutS: quick ? 600 : 1800,
  })),
];

const selected = only ? jobs.filter((j) => only.some((o) => j.file.startsWith(o))) : jobs;

// llama.cpp (node-llama-cpp 3.21.1) is bench/transformers' own install, not a workspace dependency:
// install it there on first use, as bench/transformers/package.json says, so a fresh clone's
// `npm run bench` measures the llama.cpp rows instead of reporting them missing
const transformers = `${here}transformers`;
if (selected.some((j) => j.dir === "transformers" || j.dir === "serve") && !existsSync(`${transformers}/node_modules/node-llama-cpp/package.json`)) {
  process.stderr.write(`bench: installing node-llama-cpp 3.21.1 in bench/transformers ...\n`);
  // the prebuilt binary: this platform's (optional dependencies are skipped for the rest)
  const prebuilt = `@node-llama-cpp/${process.platform === "darwin" ? "mac" : process.platform === "win32" ? "win" : process.platform}-${process.arch}@3.21.1`;
  for (const args of [["install", "--omit=optional", "--no-audit", "--no-fund"], ["install", "--no-save", "--no-audit", "--no-fund", prebuilt]]) {
    const r = spawnSync("npm", args, { cwd: transformers, stdio: "inherit" });
    if (r.status !== 0) process.stderr.write(`bench: npm ${args.join(" ")} failed (${r.status ?? r.signal}); the llama.cpp rows will report the error\n`);
  }
}

// ---- RESULTS.md ----
const version = (p: string) => {
  try {
    const file = p === "torchts" ? `${root}packages/torchts/package.json` : `${root}node_modules/${p}/package.json`;
    return JSON.parse(readFileSync(file, "utf8")).version as string;
  } catch {
    return "not installed";
  }
};
// sections other benchmarks append (bench/transformers' decode tables) follow this marker and
// survive a new run of this one
const KEEP = "<!-- sections below are written by other benchmarks and kept by npm run bench -->";
/** The kept sections as they are now: a suite of this run (bench/serve) may have rewritten its own. */
function keptNow(): string {
  try {
    const old = readFileSync(`${here}RESULTS.md`, "utf8");
    return old.includes(KEEP) ? old.slice(old.indexOf(KEEP)) : "";
  } catch {
    return ""; // no previous results
  }
}
const rows: Row[] = [];
for (const j of selected) {
  const label = `${j.file} ${(j.args ?? []).join(" ")} ${j.env ? JSON.stringify(j.env) : ""}`.trim();
  process.stderr.write(`bench: ${label} ...\n`);
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ["--import", "tsx", `${here}${j.dir ?? "suites"}/${j.file}`, ...(quick ? ["--quick"] : []), ...(j.args ?? [])], {
    cwd: root, env: { ...process.env, ...j.env }, encoding: "utf8", timeout: j.timeoutS * 1000, maxBuffer: 1 << 26,
  });
  const got = (r.stdout ?? "").split("\n").filter((l) => l.startsWith("ROW ")).map((l) => JSON.parse(l.slice(4)) as Row);
  for (const row of got) process.stderr.write(`  ${fmtRow(row)}\n`);
  rows.push(...got);
  if (r.status !== 0)
    rows.push({ suite: j.file.replace(".ts", ""), workload: label, error: `exit ${r.status ?? r.signal}: ${(r.stderr ?? "").trim().split("\n").slice(-3).join(" | ").slice(0, 300)}` });
  process.stderr.write(`  (${((performance.now() - t0) / 1000).toFixed(1)} s)\n`);
  const kept = keptNow();
  if (write) writeFileSync(`${here}RESULTS.md`, markdown(false) + (kept ? `\n${kept}` : "")); // partial results survive an interrupted run
}

function fmtRow(r: Row): string {
  if (r.error) return `${r.suite} ${r.workload}: ERROR ${r.error}`;
  if (r.suite === SMALL) return `${r.suite} ${r.variant ?? ""}${r.workload.includes("interleaved") ? " (interleaved)" : ""}: median ${r.medianMs} ms (best ${r.ms}) ${r.note ?? ""}`;
  const v = r.gflops !== undefined ? `${r.gflops} GFLOP/s` : r.gbs !== undefined ? `${r.gbs} GB/s` : "";
  return `${r.suite} ${r.workload} ${r.variant ?? ""}: ${r.ms ?? ""} ms ${v} ${r.note ?? ""}`;
}

function markdown(done: boolean): string {
// the FMA peak of the units float32 products run on: AVX-512 where torchts' own GEMM runs them, else wasm SIMD
const wasmPeak = rows.find((r) => r.suite === "probe" && r.workload === "fma peak" && /^\d+ threads$/.test(r.variant ?? ""))?.gflops;
const nativePeak = rows.find((r) => r.suite === "probe" && r.workload === "fma peak" && r.variant?.startsWith("AVX-512"))?.gflops;
const peak = nativePeak ?? wasmPeak;
const bw = rows.find((r) => r.suite === "probe" && r.workload === "memory bandwidth")?.gbs;
const best = (suite: string, workload: string, variant?: string) =>
  rows.filter((r) => r.suite === suite && r.workload === workload && !r.error && (variant === undefined || r.variant === variant))
    .map((r) => r.gflops ?? r.gbs ?? 0).reduce((a, b) => Math.max(a, b), 0) || undefined;
const x = (a?: number, b?: number) => (a && b ? `${(a / b).toFixed(2)}x` : "n/a");

// suites with sections of their own (the small step's table, bench/serve's tables) stay out of the summary
const workloads = [...new Set(rows.filter((r) => r.workload !== "info" && !r.error && r.suite !== "probe" && r.suite !== SMALL && !r.suite.startsWith("serve")).map((r) => r.workload))];
const lines: string[] = [];
lines.push(`# Benchmark results`, ``);
if (!done) lines.push(`(partial: the run was still going when this was written)`, ``);
lines.push(`Generated by \`npm run bench${quick ? " -- --quick" : ""}\` on ${new Date().toISOString()}.`, ``);
lines.push(`- machine: ${cpus()[0]?.model ?? "?"}, ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; load average at the end ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
lines.push(`- node ${process.version}; torchts ${version("torchts")}; @tensorflow/tfjs-backend-wasm ${version("@tensorflow/tfjs-backend-wasm")}; onnxruntime-node ${version("onnxruntime-node")}; @jax-js/jax ${version("@jax-js/jax")}`);
lines.push(`- hardware limits (measured): FMA peak ${peak ?? "?"} GFLOP/s (all threads, ${nativePeak ? "AVX-512, the units torchts' GEMM runs on" : "wasm SIMD"}${nativePeak ? `; wasm SIMD ${wasmPeak ?? "?"}` : ""}), copy bandwidth ${bw ?? "?"} GB/s`);
lines.push(`- times are the best of several runs (median in the full table); GB/s counts bytes read + written once`);
if (loadavg()[0]! > cpus().length)
  lines.push(`- WARNING: the load average (${loadavg()[0]!.toFixed(1)}) exceeded the core count: other processes shared the cores, so absolute numbers and ratios to the probes are unreliable`);
lines.push(``);
lines.push(`## Summary (best variant per library)`, ``);
lines.push(`| workload | unit | torchts | torchts JS fallback | onnxruntime-node | tfjs-wasm | jax-js | torchts / ort | torchts / best wasm lib | torchts / hw limit |`);
lines.push(`|---|---|---|---|---|---|---|---|---|---|`);
for (const w of workloads) {
  const unit = rows.find((r) => r.workload === w && (r.gflops !== undefined || r.gbs !== undefined))?.gflops !== undefined ? "GFLOP/s" : "GB/s";
  const t = best("torchts", w), js = best("torchts-js", w), o = best("onnxruntime-node", w), tf = best("tfjs-wasm", w), jx = best("jax-js", w);
  const wasmLib = Math.max(tf ?? 0, jx ?? 0) || undefined;
  const hw = unit === "GFLOP/s" ? peak : bw;
  const f = (v?: number) => (v === undefined ? "-" : String(v));
  lines.push(`| ${w} | ${unit} | ${f(t)} | ${f(js)} | ${f(o)} | ${f(tf)} | ${f(jx)} | ${x(t, o)} | ${x(t, wasmLib)} | ${hw && t ? ((100 * t) / hw).toFixed(0) + "%" : "n/a"} |`);
}
const smallAll = rows.filter((r) => r.suite === SMALL && !r.error);
if (smallAll.length) {
  lines.push(``, `## Small GPT training step vs PyTorch eager (same run, bench/small_step)`, ``);
  lines.push(`Vocab 96, C 128, 4 heads, 2 layers, T 64, batch 4; raw ops and plain SGD; the same initial weights and batches;`);
  lines.push(`each runner in its own process; median step time after warm-up; one table per way of running them (each runner's steps in one go, run twice in fresh processes with each runner reported from the pass where its ratio to that pass's PyTorch is lower; or interleaved in turns).`);
  lines.push(`Peer: PyTorch eager at 2 threads (Debian python3-torch, OpenBLAS).`);
}
for (const w of new Set(smallAll.map((r) => r.workload))) {
  const small = smallAll.filter((r) => r.workload === w);
  const peer = small.find((r) => r.variant?.startsWith("pytorch") && !r.variant.endsWith("1 thread"));
  lines.push(``, `### ${w}`, ``);
  lines.push(`| runner | median ms | best ms | PyTorch eager median ms | ratio (median) | losses |`, `|---|---|---|---|---|---|`);
  for (const r of small) {
    const isPeer = r === peer, isRef = r.variant?.startsWith("pytorch") && !isPeer;
    // against the peer of the row's own pass (small_step.ts runs its sequence in passes)
    const peerMs = r.peerMs ?? peer?.medianMs;
    const ratio = isPeer ? "peer" : isRef ? `${x(r.medianMs, peerMs)} (reference)` : x(r.medianMs, peerMs);
    const losses = /losses across torchts modes (identical|DIFFER)(; max[^;]*)?/.exec(r.note ?? "")?.[0] ?? "";
    lines.push(`| ${r.variant} | ${r.medianMs ?? ""} | ${r.ms ?? ""} | ${peerMs ?? "?"} | ${ratio} | ${losses} |`);
  }
}
lines.push(...issue18Acceptance(rows, quick));
lines.push(``, `## All rows`, ``, `| suite | workload | variant | best ms | median ms | GFLOP/s | GB/s | note |`, `|---|---|---|---|---|---|---|---|`);
for (const r of rows)
  lines.push(`| ${r.suite} | ${r.workload} | ${r.variant ?? ""} | ${r.ms ?? ""} | ${r.medianMs ?? ""} | ${r.gflops ?? ""} | ${r.gbs ?? ""} | ${(r.error ? "ERROR " + r.error : (r.note ?? "")).replace(/\|/g, "/")} |`);
return lines.join("\n") + "\n";
}
const kept = keptNow();
const md = markdown(true) + (kept ? `\n${kept}` : "");
if (write) writeFileSync(`${here}RESULTS.md`, md);
process.stdout.write(md);
