// The golden minGPT trajectory (real PyTorch 1.13): 20 AdamW steps with gradient clipping
// from stored initial weights must reproduce every step's loss and the final weights, in
// every eager mode.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as torch from "../../src/index.js";
import { GPT } from "../../../../examples/mingpt/model.js";

const dir = new URL("../fixtures/mingpt_train/", import.meta.url);
const expected = JSON.parse(readFileSync(new URL("expected.json", dir), "utf8"));
const cfg = JSON.parse(readFileSync(new URL("config.json", dir), "utf8"));

async function maxAbsDiff(a: torch.Tensor, b: torch.Tensor): Promise<number> {
  return a.sub(b).abs().max().item();
}

for (const mode of ["strict", "fused", "debug"] as const) {
  test(`minGPT golden trajectory (${mode})`, async () => {
    const init = await torch.safetensors.loadFile(new URL("init.safetensors", dir).pathname);
    const final = await torch.safetensors.loadFile(new URL("final.safetensors", dir).pathname);
    const batches = await torch.safetensors.loadFile(new URL("batches.safetensors", dir).pathname);
    const step0 = await torch.safetensors.loadFile(new URL("step0.safetensors", dir).pathname);
    await torch.withEagerMode(mode, async () => {
      const model = new GPT({ vocabSize: cfg.vocab_size, blockSize: cfg.block_size, nLayer: cfg.n_layer, nHead: cfg.n_head, nEmbd: cfg.n_embd });
      model.loadStateDict(new Map(Object.entries(init)), { strict: true });
      const opt = model.configureOptimizer({ lr: 1e-3, betas: [0.9, 0.95], weightDecay: 0.1, eps: 1e-8 });
      const params = [...model.namedParameters()];
      for (let i = 0; i < 20; i++) {
        const x = batches.x!.select(0, i);
        const y = batches.y!.select(0, i);
        const { logits, loss } = model.forward(x, y);
        opt.zeroGrad({ setToNone: true });
        loss!.backward();
        if (i === 0) {
          assert.ok((await maxAbsDiff(logits, step0.logits_init_batch0!)) < 1e-5, "initial logits");
          for (const [name, p] of params) {
            const d = await maxAbsDiff(p.grad!, step0[`grad.${name}`]!);
            assert.ok(d < 2e-6, `step-0 gradient of ${name} differs by ${d}`);
          }
        }
        const lossV = await loss!.item();
        const rel = Math.abs(lossV - expected.train_loss[i]) / expected.train_loss[i];
        assert.ok(rel < 1e-4, `step ${i}: loss ${lossV} vs ${expected.train_loss[i]} (rel ${rel})`);
        const norm = await torch.nn.utils.clipGradNorm_(params.map(([, p]) => p), 1.0).item();
        assert.ok(Math.abs(norm - expected.grad_norm_before_clip[i]) < 1e-4 * expected.grad_norm_before_clip[i], `step ${i}: grad norm ${norm}`);
        opt.step();
      }
      let worst = 0;
      for (const [name, p] of params) worst = Math.max(worst, await maxAbsDiff(p, final[name]!));
      assert.ok(worst < 5e-5, `final weights differ by ${worst}`);
    });
  });
}

test("minGPT golden trajectory (compiled: forward, backward, clipping and AdamW as one graph)", async () => {
  const init = await torch.safetensors.loadFile(new URL("init.safetensors", dir).pathname);
  const final = await torch.safetensors.loadFile(new URL("final.safetensors", dir).pathname);
  const batches = await torch.safetensors.loadFile(new URL("batches.safetensors", dir).pathname);
  const model = new GPT({ vocabSize: cfg.vocab_size, blockSize: cfg.block_size, nLayer: cfg.n_layer, nHead: cfg.n_head, nEmbd: cfg.n_embd });
  model.loadStateDict(new Map(Object.entries(init)), { strict: true });
  const opt = model.configureOptimizer({ lr: 1e-3, betas: [0.9, 0.95], weightDecay: 0.1, eps: 1e-8 });
  const params = [...model.namedParameters()];
  torch.compiler.resetStats();
  const step = torch.compile(
    (x: torch.Tensor, y: torch.Tensor) => {
      const { loss } = model.forward(x, y);
      opt.zeroGrad({ setToNone: true });
      loss!.backward();
      const norm = torch.nn.utils.clipGradNorm_(params.map(([, p]) => p), 1.0);
      opt.step();
      return [loss!, norm];
    },
    { modules: [model] },
  );
  for (let i = 0; i < 20; i++) {
    const [loss, norm] = step(batches.x!.select(0, i), batches.y!.select(0, i)) as torch.Tensor[];
    const lossV = await loss!.item();
    const rel = Math.abs(lossV - expected.train_loss[i]) / expected.train_loss[i];
    assert.ok(rel < 1e-4, `step ${i}: loss ${lossV} vs ${expected.train_loss[i]} (rel ${rel})`);
    const n = await norm!.item();
    assert.ok(Math.abs(n - expected.grad_norm_before_clip[i]) < 1e-4 * expected.grad_norm_before_clip[i], `step ${i}: grad norm ${n}`);
  }
  let worst = 0;
  for (const [name, p] of params) worst = Math.max(worst, await maxAbsDiff(p, final[name]!));
  assert.ok(worst < 5e-5, `final weights differ by ${worst}`);
  const st = torch.compiler.stats();
  assert.ok(st.recompiles === 0, `recompiles: ${st.recompileReasons.join("; ")}`);
  assert.ok(st.hits >= 18, `compiled step replayed from its entry (hits ${st.hits})`);
});
