// WebGPU benchmark for a machine with a real GPU. Installs nothing and needs no network: it uses
// the repository's node_modules (the `webgpu` package ships Dawn for Linux/macOS/Windows).
//   node --import tsx bench/gpu/run.ts [--peak-tflops 60] [--skip-tests] [--backend vulkan]
// 1. runs the webgpu op tests (golden cases in every mode, device semantics, minGPT parity);
// 2. times matmul (GFLOP/s, and % of --peak-tflops, the card's fp32 peak, when given), attention
//    and one minGPT training step in strict / fused / compiled modes;
// 3. prints one table.
// Status: written and smoke-run on CPU adapters only (llvmpipe): no GPU was lent when it was
// written, so no GPU numbers exist yet.
import { spawnSync } from "node:child_process";
import * as torch from "../../packages/torchts/src/index.js";
import { GPT } from "../../examples/mingpt/model.js";

const args = process.argv.slice(2);
const flag = (n: string) => {
  const i = args.indexOf(`--${n}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const peak = Number(flag("peak-tflops") ?? process.env.GPU_PEAK_TFLOPS ?? NaN);
const small = args.includes("--small"); // CPU adapters: shapes that finish in seconds
const rows: string[][] = [];
const row = (...c: (string | number)[]) => rows.push(c.map(String));

if (!args.includes("--skip-tests")) {
  const files = spawnSync("find", ["test/device/webgpu", "-name", "*.test.ts"], { cwd: "packages/torchts", encoding: "utf8" }).stdout.trim().split("\n");
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ["--expose-gc", "--import", "tsx", "--test", ...files], {
    cwd: "packages/torchts",
    encoding: "utf8",
    env: { ...process.env, TORCHTS_REQUIRE_WEBGPU: "1" },
  });
  const sum = (k: string) => (r.stdout.match(new RegExp(`^# ${k} (\\d+)`, "m")) ?? [])[1] ?? "?";
  row("webgpu op tests", "-", `pass ${sum("pass")} fail ${sum("fail")} skip ${sum("skipped")}`, `${((performance.now() - t0) / 1000).toFixed(0)} s`, "");
  if (r.status !== 0) console.error(r.stdout.split("\n").filter((l) => l.startsWith("not ok")).slice(0, 20).join("\n"));
}

const backend = flag("backend");
if (!(await torch.webgpu.isAvailable(backend ? { backend } : {}))) {
  console.error(`no WebGPU adapter: ${torch.webgpu.unavailableReason()}`);
  process.exit(1);
}
await torch.webgpu.init(backend ? { backend } : {});
const info = torch.webgpu.getDeviceInfo();

async function time(fn: () => unknown, reps: number): Promise<number> {
  fn(); // warm-up: compiles pipelines
  await torch.webgpu.synchronize();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) fn();
  await torch.webgpu.synchronize();
  return (performance.now() - t0) / reps;
}

const modes = ["strict", "fused", "compiled"] as const;
const inMode = async (m: (typeof modes)[number], f: () => unknown, reps: number) =>
  torch.withEagerMode(m === "compiled" ? "strict" : m, () => time(f, reps));

// matmul
for (const n of small ? [128, 256] : [1024, 2048, 4096]) {
  const a = torch.randn(n, n, { device: "webgpu" });
  const b = torch.randn(n, n, { device: "webgpu" });
  const ms = await time(() => torch.noGrad(() => a.matmul(b)), small ? 3 : 20);
  const gflops = (2 * n ** 3) / (ms * 1e6);
  row(`matmul ${n}x${n}x${n}`, "strict", `${gflops.toFixed(1)} GFLOP/s`, `${ms.toFixed(2)} ms`, Number.isFinite(peak) ? `${((gflops / (peak * 1000)) * 100).toFixed(1)}% of peak` : "peak unknown");
}

// attention (scaled dot-product, causal)
{
  const [B, H, T, D] = small ? [1, 2, 64, 32] : [8, 12, 512, 64];
  const q = torch.randn(B, H, T, D, { device: "webgpu" });
  const k = torch.randn(B, H, T, D, { device: "webgpu" });
  const v = torch.randn(B, H, T, D, { device: "webgpu" });
  const attn = () => torch.noGrad(() => torch.nn.functional.scaledDotProductAttention(q, k, v, { isCausal: true }));
  const compiled = torch.compile(attn, { name: "attention" });
  for (const m of modes) {
    const ms = await inMode(m, m === "compiled" ? compiled : attn, small ? 2 : 10);
    const flops = 4 * B * H * T * T * D;
    row(`attention B${B} H${H} T${T} D${D}`, m, `${(flops / (ms * 1e6)).toFixed(1)} GFLOP/s`, `${ms.toFixed(2)} ms`, "");
  }
}

// minGPT training step (forward, backward, AdamW)
{
  const cfg = small ? { vocabSize: 65, blockSize: 32, nLayer: 2, nHead: 2, nEmbd: 32 } : { vocabSize: 65, blockSize: 256, nLayer: 6, nHead: 6, nEmbd: 384 };
  const batch = small ? 4 : 32;
  for (const m of modes) {
    torch.manualSeed(0);
    const model = new GPT(cfg);
    model.to("webgpu");
    const opt = model.configureOptimizer({ lr: 3e-4, betas: [0.9, 0.95], weightDecay: 0.1 });
    const x = torch.randint(0, cfg.vocabSize, [batch, cfg.blockSize]).to("webgpu");
    const y = torch.randint(0, cfg.vocabSize, [batch, cfg.blockSize]).to("webgpu");
    const step = () => {
      const { loss } = model.forward(x, y);
      opt.zeroGrad({ setToNone: true });
      loss!.backward();
      opt.step();
      return loss;
    };
    const f = m === "compiled" ? torch.compile(step, { name: "train_step", modules: [model] }) : step;
    const ms = await inMode(m, f, small ? 2 : 10);
    row(`minGPT step ${cfg.nLayer}L ${cfg.nEmbd}d B${batch}x${cfg.blockSize}`, m, `${((batch * cfg.blockSize) / ms * 1000).toFixed(0)} tok/s`, `${ms.toFixed(1)} ms`, "");
  }
}

const head = ["benchmark", "mode", "throughput", "time", "vs peak"];
const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
const line = (r: string[]) => r.map((c, i) => c.padEnd(w[i]!)).join(" | ");
console.log(`\nwebgpu on ${info.adapter} (backend ${info.backend}, shader-f16 ${info.shaderF16})`);
console.log(line(head));
console.log(w.map((n) => "-".repeat(n)).join("-|-"));
for (const r of rows) console.log(line(r));
torch.webgpu.shutdown();
