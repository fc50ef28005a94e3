// Where a decode step of the bench Llama (llama.ts's model, prompt 128) goes: wall ms per token
// and torch.profiler kernel time per kernel name over 8 decode steps, for one mode.
//   node --import tsx bench/transformers/profile_decode.ts [strict|fused|compiled] [--int8 | --w8a8] [--seq]
// --int8: int8 weights (weight-only); --w8a8: int8 weights and per-token int8 activations.
// compiled: the model keeps its compiled steps, so after the warm-up generation every measured
// step is a replay. --seq prints one step's kernels in order (q, rope, k, rope, kv write, ...).
import * as torch from "../../packages/torchts/src/index.js";
import { quantize } from "../../packages/torchts/src/transformers/index.js";
import { buildModel, config } from "./bench_model.js";

const mode = (process.argv[2] ?? "compiled") as "strict" | "fused" | "compiled";
const w8a8 = process.argv.includes("--w8a8");
const int8 = w8a8 || process.argv.includes("--int8");
const m = buildModel();
if (int8) await quantize(m, { bits: 8, includeLmHead: true, activations: w8a8 ? "int8" : "float" });
const prompt = Array.from({ length: 128 }, (_, i) => (i * 7919 + 13) % config.vocabSize);
const compile = mode === "compiled";
await torch.withEagerMode(compile ? "strict" : mode, async () => {
  await m.generate(prompt, { maxNewTokens: 16, stopTokenIds: [], compile }); // warm-up (compiled: records the steps)
  const [N0, N1] = [6, 14];
  let prof: ReturnType<typeof torch.profiler.profile> | null = null;
  const stamps: number[] = [];
  await m.generate(prompt, {
    maxNewTokens: 16, stopTokenIds: [], compile,
    streamer: (e) => {
      stamps.push(performance.now());
      if (e.step === N0) prof = torch.profiler.profile();
      if (e.step === N1) prof!.stop();
    },
  });
  const steps = N1 - N0;
  const events = prof!.events;
  const perStep = events.length / steps;
  const byName = new Map<string, [number, number]>();
  for (const e of events) {
    const r = byName.get(e.name) ?? [0, 0];
    r[0]++;
    r[1] += e.dur / 1000;
    byName.set(e.name, r);
  }
  const kernels = events.reduce((a, e) => a + e.dur / 1000, 0) / steps;
  console.log(`${mode}${w8a8 ? " w8a8" : int8 ? " int8" : ""}: ${((stamps[N1]! - stamps[N0]!) / steps).toFixed(1)} ms/token wall, kernels ${kernels.toFixed(1)} ms/token, ${perStep} kernels/token`);
  for (const [k, [c, t]] of [...byName].sort((a, b) => b[1][1] - a[1][1])) console.log(`  ${k}: ${c / steps}/token, ${(t / steps).toFixed(2)} ms/token`);
  if (process.argv.includes("--seq")) console.log(events.slice(0, perStep).map((e) => `${e.name} ${e.dur.toFixed(0)} us`).join("\n"));
});
