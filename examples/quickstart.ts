// Quickstart: train a 2-layer MLP on a synthetic 3-class problem with plain torchts ops,
// autograd and hand-written SGD. Run with `npm run quickstart`.
import * as torch from "torchts";

torch.manualSeed(0);

// Synthetic task: the label is which of three fixed directions a point lies closest to.
const N = 512,
  D = 8,
  H = 32,
  C = 3;
const centers = torch.randn(C, D);
const x = torch.randn(N, D);
const y = x.matmul(centers.t()).argmax(1); // int64 labels in [0, C)

// Parameters (leaves that require grad), scaled like PyTorch's default Linear init.
const w1 = torch
  .randn(D, H)
  .mul(1 / Math.sqrt(D))
  .requiresGrad_();
const b1 = torch.zeros(H).requiresGrad_();
const w2 = torch
  .randn(H, C)
  .mul(1 / Math.sqrt(H))
  .requiresGrad_();
const b2 = torch.zeros(C).requiresGrad_();
const params = [w1, b1, w2, b2];

// Cross-entropy from primitives: log-softmax via logsumexp, then pick the target class
// with a one-hot mask (torch.nn.functional.crossEntropy does the same in one call).
function crossEntropy(logits: torch.Tensor, target: torch.Tensor): torch.Tensor {
  const logp = logits.sub(logits.logsumexp(-1, true));
  const oneHot = torch.arange(C).eq(target.unsqueeze(1)).float();
  return logp.mul(oneHot).sum(1).mean().neg();
}

const lr = 0.5;
for (let step = 0; step <= 200; step++) {
  const logits = x.matmul(w1).add(b1).relu().matmul(w2).add(b2);
  const loss = crossEntropy(logits, y);
  for (const p of params) p.grad = null;
  loss.backward();
  torch.noGrad(() => {
    for (const p of params) p.sub_(p.grad!.mul(lr));
  });
  if (step % 20 === 0) {
    const acc = await logits.argmax(1).eq(y).float().mean().item();
    console.log(`step ${String(step).padStart(3)}  loss ${(await loss.item()).toFixed(4)}  accuracy ${acc.toFixed(3)}`);
  }
}
