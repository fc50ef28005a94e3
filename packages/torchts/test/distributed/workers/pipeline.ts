// Run by test/distributed/pipeline.test.ts under `torchts run --nproc-per-node 4`: minGPT cut into 4
// stages (embeddings; block 0; block 1; final norm, head and loss), one per rank, trained 10 AdamW
// steps with GPipe and with 1F1B over 4 micro-batches, against single-process training on the whole
// batch (computed on every rank): the losses and every stage's parameters.
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { GPT } from "../../../../../examples/mingpt/model.js";
import { assertClose, check, referenceRun, report } from "./checks.js";
const dist = torch.distributed;
const { nn } = torch;
const { PipelineStage, ScheduleGPipe, Schedule1F1B } = dist.pipelining;

await dist.initProcessGroup({ backend: "gloo", timeout: 60_000 });
const rank = dist.getRank();
const n = dist.getWorldSize();
assert.equal(n, 4, "a 4-stage pipeline");
const cfg = { vocabSize: 32, blockSize: 16, nLayer: 2, nHead: 2, nEmbd: 32 };
const B = 8;
const T = 16;
const STEPS = 10;
const M = 4;
torch.manualSeed(7);
const data = Array.from({ length: STEPS }, () => torch.randint(0, cfg.vocabSize, [B, T + 1]));
const xy = (d: Tensor): [Tensor, Tensor] => [d.narrow(1, 0, T), d.narrow(1, 1, T)];
const gpt = () => (torch.manualSeed(100), new GPT(cfg));
const adamw = (ps: Iterable<Tensor>) => new torch.optim.AdamW(ps, { lr: 3e-3, betas: [0.9, 0.95], weightDecay: 0.1 });

const ref = gpt();
const refOpt = adamw(ref.parameters());
const { losses: refLosses, params: refParams } = await referenceRun(ref, data, xy, () => (refOpt.step(), refOpt.zeroGrad()));

type AnyModule = InstanceType<typeof nn.Module>;
/** This rank's stage of a fresh minGPT, and the prefix of its parameters' names in the whole model. */
function stageOf(m: GPT): { mod: AnyModule; prefixes: string[] } {
  const t = m.transformer as unknown as { wte: AnyModule; wpe: AnyModule; h: Iterable<AnyModule>; ln_f: AnyModule };
  const blocks = [...t.h];
  if (rank === 0) {
    class Embed extends nn.Module {
      wte = t.wte;
      wpe = t.wpe;
      override forward(idx: Tensor): Tensor {
        return this.wte.forward(idx).add(this.wpe.forward(torch.arange(idx.shape[1]!)));
      }
    }
    return { mod: new Embed(), prefixes: ["transformer.wte.", "transformer.wpe."] };
  }
  if (rank === 3) {
    class Head extends nn.Module {
      ln_f = t.ln_f;
      lm_head = m.lm_head;
      override forward(x: Tensor): Tensor {
        return this.lm_head.forward(this.ln_f.forward(x));
      }
    }
    return { mod: new Head(), prefixes: ["transformer.ln_f.", "lm_head."] };
  }
  return { mod: blocks[rank - 1]!, prefixes: [`transformer.h.${rank - 1}.`] };
}
const lossFn = (logits: Tensor, target: Tensor) => nn.functional.crossEntropy(logits.reshape(-1, cfg.vocabSize), target.reshape(-1));

for (const [name, Schedule] of [["GPipe", ScheduleGPipe], ["1F1B", Schedule1F1B]] as const)
  await check(`${name}: a 4-stage minGPT over ${M} micro-batches equals single-process training (10 AdamW steps)`, async () => {
    const full = gpt();
    const { mod, prefixes } = stageOf(full);
    const stage = new PipelineStage(mod, rank, n);
    const schedule = new Schedule(stage, M, rank === n - 1 ? lossFn : null);
    const opt = adamw(mod.parameters());
    const losses: number[] = [];
    for (const d of data) {
      const [x, y] = xy(d);
      const mb: Tensor[] = [];
      if (rank === 0) schedule.step(x);
      else if (rank === n - 1) schedule.step({ target: y, losses: mb });
      else schedule.step();
      opt.step();
      opt.zeroGrad();
      // the whole batch's mean loss: the micro-batches' mean (equal sizes), from the last stage
      const l = torch.tensor([rank === n - 1 ? (await Promise.all(mb.map((t) => t.item()))).reduce((a, b) => a + b, 0) / M : 0], { dtype: "float32" });
      dist.broadcast(l, n - 1);
      losses.push(await l.item());
    }
    for (const [i, l] of losses.entries()) assert.ok(Math.abs(l - refLosses[i]!) <= 1e-5 * refLosses[i]!, `step ${i + 1}: loss ${l} vs ${refLosses[i]}`);
    let count = 0;
    for (const [pname, p] of full.namedParameters()) {
      if (!prefixes.some((s) => pname.startsWith(s))) continue;
      count++;
      const r = refParams.get(pname)!;
      if (pname.endsWith("attn.c_attn.bias")) {
        // the key biases' true gradient is 0 (see ddp.ts): their Adam steps follow rounding noise
        const C = cfg.nEmbd;
        await assertClose(p.narrow(0, 0, C), r.narrow(0, 0, C), `${pname} (query)`, 1e-5, 1e-5);
        await assertClose(p.narrow(0, 2 * C, C), r.narrow(0, 2 * C, C), `${pname} (value)`, 1e-5, 1e-5);
        await assertClose(p.narrow(0, C, C), r.narrow(0, C, C), `${pname} (key)`, 0, 3e-3 * STEPS);
      } else await assertClose(p, r, pname, 1e-5, 1e-5);
    }
    assert.ok(count > 0, "this stage has parameters");
  });

await check("PipelineStage checks its place", () => {
  assert.throws(() => new PipelineStage(new nn.Linear(2, 2), (rank + 1) % n, n), /runs on group rank/);
  assert.throws(() => new PipelineStage(new nn.Linear(2, 2), rank, n + 1), /must equal the group's size/);
});

report(rank);
await dist.destroyProcessGroup();
