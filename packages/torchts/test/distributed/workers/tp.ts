// Run by test/distributed/tp.test.ts under `torchts run` at world sizes 2 and 4: tensor parallel
// modules (parallelizeModule with Colwise/Rowwise/Sequence parallel and PrepareModuleInput) against
// the same modules unsharded (same seeds, same inputs on every rank): outputs, the gradients of
// every parameter and of the input, an optimizer step, and the collectives a forward issues.
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { assertClose, check, report } from "./checks.js";
import { AutoModelForCausalLM } from "../../../src/transformers/index.js";
import { expected, fixtureDir } from "../../transformers/helpers.js";
const dist = torch.distributed;
const { nn } = torch;
const F = nn.functional;
const { ColwiseParallel, RowwiseParallel, SequenceParallel, PrepareModuleInput, parallelizeModule } = dist.tensor.parallel;
const { Shard, Replicate } = dist.tensor;
type DT = InstanceType<typeof dist.tensor.DTensor>;

await dist.initProcessGroup({ backend: "gloo", timeout: 60_000 });
const rank = dist.getRank();
const n = dist.getWorldSize();
const mesh = dist.initDeviceMesh("cpu", [n]);
const C = 16;
const B = 3;
const T = 8;

class MLP extends nn.Module {
  fc1 = new nn.Linear(C, 4 * C);
  fc2 = new nn.Linear(4 * C, C);
  override forward(x: Tensor): Tensor {
    return this.fc2.forward(F.gelu(this.fc1.forward(x)));
  }
}

/** Attention with separate projections; the head count comes from the projection's width (-1), as tensor parallel code needs. */
class Attention extends nn.Module {
  wq = new nn.Linear(C, C);
  wk = new nn.Linear(C, C);
  wv = new nn.Linear(C, C);
  wo = new nn.Linear(C, C);
  override forward(x: Tensor): Tensor {
    const [b, t] = x.shape as [number, number];
    const hd = 4;
    const heads = (p: Tensor) => p.view(b, t, -1, hd).transpose(1, 2);
    const y = F.scaledDotProductAttention(heads(this.wq.forward(x)), heads(this.wk.forward(x)), heads(this.wv.forward(x)), { isCausal: true });
    return this.wo.forward(y.transpose(1, 2).reshape(b, t, -1));
  }
}

class Block extends nn.Module {
  norm = new nn.LayerNorm(C);
  mlp = new MLP();
  override forward(x: Tensor): Tensor {
    return this.mlp.forward(this.norm.forward(x));
  }
}

function pair<M extends InstanceType<typeof nn.Module>>(make: () => M): [M, M] {
  torch.manualSeed(21);
  const ref = make();
  torch.manualSeed(21);
  return [ref, make()];
}
const input = () => (torch.manualSeed(5), torch.randn([B, T, C]));

/** Every parameter's gradient (whole, from the DTensor) equals the unsharded module's. */
async function sameGrads(tp: InstanceType<typeof nn.Module>, ref: InstanceType<typeof nn.Module>): Promise<void> {
  for (const [name, p] of tp.namedParameters()) {
    assert.ok(p instanceof dist.tensor.DTensor, `${name} is a DTensor`);
    const g = p.grad as DT | null;
    assert.ok(g, `${name} has a gradient`);
    await assertClose(g.fullTensor(), ref.getParameter(name).grad!, `${name}.grad`, 1e-4, 1e-5);
  }
}

await check("MLP (fc1 Colwise, fc2 Rowwise): one all-reduce per forward; output, parameter and input gradients equal the unsharded MLP; an AdamW step too", async () => {
  const [ref, tp] = pair(() => new MLP());
  parallelizeModule(tp, mesh, { fc1: new ColwiseParallel(), fc2: new RowwiseParallel() });
  assert.equal(String((tp.fc1.weight as unknown as DT).placements[0]), "Shard(dim=0)");
  assert.equal(String((tp.fc2.weight as unknown as DT).placements[0]), "Shard(dim=1)");
  const x0 = input().requiresGrad_();
  const x1 = input().requiresGrad_();
  const world = dist.group.WORLD!;
  const before = world.seq;
  const y = tp.forward(x1);
  assert.equal(world.seq - before, 1, "collectives in the forward");
  assert.ok(!(y instanceof dist.tensor.DTensor), "useLocalOutput: a plain tensor");
  const want = ref.forward(x0);
  await assertClose(y, want, "output", 1e-5, 1e-6);
  want.pow(2).sum().backward();
  y.pow(2).sum().backward();
  await sameGrads(tp, ref);
  await assertClose(x1.grad!, x0.grad!, "input grad", 1e-4, 1e-6);
  const opts = { lr: 1e-2, betas: [0.9, 0.95] as [number, number], weightDecay: 0.1 };
  new torch.optim.AdamW(ref.parameters(), opts).step();
  new torch.optim.AdamW(tp.parameters(), opts).step();
  for (const [name, p] of tp.namedParameters()) await assertClose((p as unknown as DT).fullTensor(), ref.getParameter(name), `${name} after a step`, 1e-5, 1e-6);
});

await check("attention (wq/wk/wv Colwise, wo Rowwise: heads split across ranks): output and gradients equal the unsharded block", async () => {
  const [ref, tp] = pair(() => new Attention());
  parallelizeModule(tp, mesh, { wq: new ColwiseParallel(), wk: new ColwiseParallel(), wv: new ColwiseParallel(), wo: new RowwiseParallel() });
  const x0 = input().requiresGrad_();
  const x1 = input().requiresGrad_();
  const y = tp.forward(x1);
  const want = ref.forward(x0);
  await assertClose(y, want, "output", 1e-5, 1e-6);
  want.pow(2).sum().backward();
  y.pow(2).sum().backward();
  await sameGrads(tp, ref);
  await assertClose(x1.grad!, x0.grad!, "input grad", 1e-4, 1e-6);
});

await check("sequence parallel: LayerNorm on sequence shards, PrepareModuleInput gathers, fc2 reduce-scatters back to sequence shards", async () => {
  const [ref, tp] = pair(() => new Block());
  parallelizeModule(tp, mesh, {
    norm: new SequenceParallel(),
    mlp: new PrepareModuleInput({ inputLayouts: Shard(1), desiredInputLayouts: Replicate() }),
    "mlp.fc1": new ColwiseParallel(),
    "mlp.fc2": new RowwiseParallel({ outputLayouts: Shard(1) }),
  });
  const tl = T / n;
  const full = input();
  const x0 = full.clone().requiresGrad_();
  const x1 = full.narrow(1, rank * tl, tl).contiguous().requiresGrad_(); // this rank's sequence piece
  const y = tp.forward(x1) as Tensor;
  const want = ref.forward(x0);
  assert.deepEqual(y.shape, [B, tl, C]);
  await assertClose(y, want.narrow(1, rank * tl, tl), "this rank's output piece", 1e-5, 1e-6);
  // the loss is the sum of the ranks' pieces' losses
  want.pow(2).sum().backward();
  y.pow(2).sum().backward();
  await sameGrads(tp, ref);
  await assertClose(x1.grad!, x0.grad!.narrow(1, rank * tl, tl), "input grad (this rank's piece)", 1e-4, 1e-6);
});

await check("the golden Llama (GQA) with the tensor parallel plan gives transformers' greedy continuations (2 ranks; 4 do not divide its 2 kv heads)", async () => {
  const dir = fixtureDir("llama_gqa");
  const model = await AutoModelForCausalLM.fromPretrained(dir);
  if (n !== 2) {
    assert.throws(() => dist.tensor.parallel.llamaTpPlan(model.config, n), /numKeyValueHeads \(2\) is not divisible by the tensor parallel size 4/);
    return;
  }
  parallelizeModule(model, mesh, dist.tensor.parallel.llamaTpPlan(model.config, n));
  const q = model.getSubmodule("model.layers.0.self_attn.q_proj") as unknown as { weight: DT };
  assert.deepEqual([String(q.weight.placements[0]), q.weight.toLocal().shape[0]], ["Shard(dim=0)", 32]);
  for (const p of expected("llama_gqa").prompts) {
    const ids = [...p.input_ids];
    torch.noGrad(() => {
      for (let i = 0; i < 16; i++) {
        const logits = model.forward(torch.tensor([ids])).logits;
        ids.push((logits.select(1, -1).argmax(-1)._tolistSync() as number[])[0]!);
      }
    });
    assert.deepEqual(ids.slice(p.input_ids.length), p.greedy_continuation);
  }
});

await check("parallelizeModule: a plan entry that matches nothing, a style on an unsupported module", () => {
  assert.throws(() => parallelizeModule(new MLP(), mesh, { fc3: new ColwiseParallel() }), /no submodule matches 'fc3'/);
  assert.throws(() => parallelizeModule(new nn.LayerNorm(4), mesh, new ColwiseParallel()), /only support nn.Linear and nn.Embedding/);
});

report(rank);
await dist.destroyProcessGroup();
