// The golden checkpoints on the webgpu device (API in strict, fused and compiled modes, and the
// CLI with --device webgpu). Without an adapter these skip with the reason (see
// test/device/webgpu/setup.ts; TORCHTS_REQUIRE_WEBGPU=1 turns a missing adapter into a failure).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";
import { AutoModelForCausalLM } from "../../src/transformers/index.js";
import { skip } from "../device/webgpu/setup.js";
import { GOLDEN, expected, fixtureDir, maxAbsDiff, referenceTensors } from "./helpers.js";

for (const mode of ["strict", "fused", "compiled"] as const)
  test(`golden models on webgpu: logits, hidden states, greedy continuations (${mode})`, { skip }, async () => {
    await torch.withEagerMode(mode === "compiled" ? "strict" : mode, async () => {
      for (const name of GOLDEN) {
        const model = await AutoModelForCausalLM.fromPretrained(fixtureDir(name), { deviceMap: "webgpu" });
        assert.equal(model.device, "webgpu");
        const fwd = (x: torch.Tensor, hidden: boolean) => torch.noGrad(() => model.forward(x, { outputHiddenStates: hidden }));
        const forward = mode === "compiled" ? torch.compile(fwd, { modules: [model], name }) : fwd;
        const ref = await referenceTensors(name);
        for (const [i, p] of expected(name).prompts.entries()) {
          const { logits, hiddenStates } = forward(torch.tensor([p.input_ids], { device: "webgpu" }), i === 0);
          const d = await maxAbsDiff((await torch.webgpu.toAsync(logits, "cpu")), ref[`logits.${i}`]!);
          assert.ok(d < 1e-4, `${name} prompt ${i}: logits differ by ${d}`);
          if (i === 0) {
            const keys = ["embed", ...Array.from({ length: model.config.numHiddenLayers }, (_, k) => `layer${k}`), "final_norm"];
            for (const [k, key] of keys.entries()) {
              const dh = await maxAbsDiff(await torch.webgpu.toAsync(hiddenStates![k]!, "cpu"), ref[`hidden.0.${key}`]!);
              assert.ok(dh < 1e-4, `${name}: hidden ${key} differs by ${dh}`);
            }
          }
          const out = await model.generate(p.input_ids, { maxNewTokens: 16, stopTokenIds: [], compile: mode === "compiled" });
          assert.deepEqual(out.newTokens[0], p.greedy_continuation, `${name} prompt ${i}: greedy`);
        }
        const [p0, p1] = expected(name).prompts;
        const batch = await model.generate([p0!.input_ids, p1!.input_ids], { maxNewTokens: 16, stopTokenIds: [] });
        assert.deepEqual(batch.newTokens, [p0!.greedy_continuation, p1!.greedy_continuation], `${name}: batched`);
      }
    });
  });

test("CLI --device webgpu reproduces the greedy continuations", { skip }, async () => {
  const pkgDir = fileURLToPath(new URL("../../", import.meta.url));
  for (const name of GOLDEN) {
    const p = expected(name).prompts[1]!;
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ["--import", "tsx", "src/cli.ts", "generate", "--model", fixtureDir(name), "--input-ids", p.input_ids.join(","), "--max-new-tokens", "16", "--greedy", "--json", "--device", "webgpu"], { cwd: pkgDir }, (err, out, errOut) => (err ? reject(new Error(errOut)) : resolve(out))),
    );
    assert.deepEqual((JSON.parse(stdout) as { new_tokens: number[] }).new_tokens, p.greedy_continuation, name);
  }
});

test("quantized models on webgpu (int8 weight-only, int8 dynamic activations, int4) match the cpu kernels", { skip }, async () => {
  const { quantize } = await import("../../src/transformers/index.js");
  const p = expected("llama_gqa").prompts[0]!;
  for (const opts of [{ bits: 8 }, { bits: 8, activations: "int8" }, { bits: 4, groupSize: 32 }] as const) {
    const cpu = await quantize(await AutoModelForCausalLM.fromPretrained(fixtureDir("llama_gqa")), opts);
    const gpu = await quantize(await AutoModelForCausalLM.fromPretrained(fixtureDir("llama_gqa"), { deviceMap: "webgpu" }), opts);
    const ids = p.full_sequence.slice(0, 12);
    const lc = torch.noGrad(() => cpu.forward(torch.tensor([ids])).logits);
    const lg = torch.noGrad(() => gpu.forward(torch.tensor([ids], { device: "webgpu" })).logits);
    const d = await maxAbsDiff(await torch.webgpu.toAsync(lg, "cpu"), lc);
    assert.ok(d < 1e-4, `${JSON.stringify(opts)}: cpu and webgpu logits differ by ${d}`);
    const a = await cpu.generate(p.input_ids, { maxNewTokens: 8, stopTokenIds: [] });
    const b = await gpu.generate(p.input_ids, { maxNewTokens: 8, stopTokenIds: [] });
    assert.deepEqual(b.newTokens, a.newTokens, `${JSON.stringify(opts)}: greedy tokens`);
  }
});
