// MFU and TFLOP/s as `train` prints them against an independent count: every matmul-class kernel the
// training steps ran, read from the profiler (strict eager: one kernel per op, named with its input
// shapes). A matmul [..., M, K] x [..., K, N] is 2 M N K FLOPs per batch entry; the attention kernel 2 B H L S (E + Ev)
// (q k^T and p v); its backward's probability recompute 2 B H L S E, which TorchTitan's formula leaves
// out (model FLOPs), so it is counted separately.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as torch from "torchts";
import { buildConfig } from "../src/config/parse.js";
import { JOB_SCHEMA } from "../src/config/job.js";
import { train } from "../src/trainer.js";
import { RECIPES, tmp } from "./helpers.js";

interface Counted {
  model: number;
  recompute: number;
  matmulKernels: number;
  attentionKernels: number;
}

const dims = (s: string): number[][] => [...s.matchAll(/float32\[([\d,]*)\]/g)].map((m) => (m[1] ? m[1].split(",").map(Number) : []));

function countFlops(events: { name: string }[]): Counted {
  const c: Counted = { model: 0, recompute: 0, matmulKernels: 0, attentionKernels: 0 };
  for (const e of events) {
    if (e.name.startsWith("matmul ")) {
      // [..., M, K] x [..., K, N]: the leading dims are the batch
      const [a, b] = dims(e.name) as [number[], number[]];
      const batch = a.slice(0, -2).reduce((x, y) => x * y, 1);
      const [M, K, N] = [a[a.length - 2]!, a[a.length - 1]!, b[b.length - 1]!];
      c.model += 2 * batch * M * N * K;
      c.matmulKernels++;
    } else if (e.name.startsWith("composite ") && e.name.includes('"name":"attention"')) {
      const [q, k, v] = dims(e.name) as [number[], number[], number[]];
      const [B, H, L, E] = q as [number, number, number, number];
      const S = k[2]!;
      if (e.name.includes('"probs":true')) c.recompute += 2 * B * H * L * S * E;
      else c.model += 2 * B * H * L * S * (E + v[3]!);
      c.attentionKernels++;
    }
  }
  return c;
}

test("printed TFLOP/s and MFU agree within 5% with the profiler's count of the steps' matmul FLOPs", async (t) => {
  const dump = tmp("flops");
  const steps = 4;
  const peakTflops = 0.05;
  const c = buildConfig(JOB_SCHEMA, readFileSync(`${RECIPES}/llama3_debug.toml`, "utf8"), "llama3_debug.toml", [
    ["model.flavor", "tiny"], ["training.seq_len", "128"], ["training.local_batch_size", "2"], ["training.steps", String(steps)],
    ["compile.enable", "false"], ["training.eager_mode", "strict"], ["checkpoint.enable", "false"], ["metrics.log_freq", "2"],
    ["metrics.peak_tflops", String(peakTflops)], ["metrics.enable_plot", "false"], ["metrics.progress", "never"], ["job.dump_folder", dump],
  ]);
  const lines: string[] = [];
  const prof = torch.profiler.profile({ recordShapes: true });
  let r: Awaited<ReturnType<typeof train>>;
  try {
    r = await train(c, { out: (l) => lines.push(l) });
  } finally {
    prof.stop();
  }
  const counted = countFlops(prof.events);
  const tokens = steps * 2 * 128;
  const perToken = counted.model / tokens;
  // the formula and the count: 6N for the linears (forward, input and weight gradients), 12 L H Q T for attention
  assert.ok(counted.matmulKernels > 0 && counted.attentionKernels > 0, "the profile saw the matmuls and the attention kernels");
  assert.ok(Math.abs(perToken / r.flopsPerToken - 1) < 0.05, `count ${perToken} FLOPs/token vs formula ${r.flopsPerToken}`);
  const executed = (counted.model + counted.recompute) / tokens;
  t.diagnostic(`FLOPs/token: formula ${r.flopsPerToken}, profiler count ${perToken} (${((perToken / r.flopsPerToken - 1) * 100).toFixed(2)}%), with the attention recompute ${executed} (${((executed / r.flopsPerToken - 1) * 100).toFixed(2)}%)`);
  assert.ok(Math.abs(executed / r.flopsPerToken - 1) < 0.05, `executed ${executed} FLOPs/token (with the attention recompute) vs formula ${r.flopsPerToken}`);

  const logged = lines.filter((l) => l.startsWith("step:"));
  assert.equal(logged.length, steps / 2);
  for (const l of logged) {
    const m = /tps: ([\d,]+)\s+tflops: ([\d.]+)\s+mfu: ([\d.]+)%/.exec(l);
    assert.ok(m, l);
    const tps = Number(m[1]!.replace(/,/g, ""));
    const [tflops, mfu] = [Number(m[2]), Number(m[3])];
    const independent = (perToken * tps) / 1e12;
    assert.ok(Math.abs(tflops / independent - 1) < 0.05, `printed ${tflops} TFLOP/s vs counted ${independent}: ${l}`);
    assert.ok(Math.abs(mfu / ((100 * independent) / peakTflops) - 1) < 0.05, `printed MFU ${mfu}% vs counted ${(100 * independent) / peakTflops}%`);
  }
  // the JSONL record carries the same numbers
  const rec = r.records[0]!;
  assert.ok(Math.abs((rec.tflops as number) - (r.flopsPerToken * (rec["throughput(tps)"] as number)) / 1e12) < 1e-12);
  assert.ok(Math.abs((rec["mfu(%)"] as number) - (100 * (rec.tflops as number)) / peakTflops) < 1e-9);
});
