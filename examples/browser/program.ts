// The tensor program the browser example runs: a small MLP (seeded on-device init), one forward,
// backward and SGD step, then the new loss and a softmax. Runs on any device; the browser test
// compares the page's WebGPU numbers with this program on cpu.
import type * as Torch from "../../packages/torchts/src/index.js";

export interface ProgramResult {
  device: string;
  loss0: number;
  loss1: number;
  probs: number[];
}

export async function program(torch: typeof Torch, device: string): Promise<ProgramResult> {
  torch.manualSeed(0);
  const x = torch.randn(32, 8, { device });
  const target = x.sum(1, true).gt(0).float(); // a learnable labelling
  const w1 = torch.randn(8, 16, { device }).mul(0.3).requiresGrad_();
  const w2 = torch.randn(16, 1, { device }).mul(0.3).requiresGrad_();
  const forward = () => torch.sigmoid(torch.nn.functional.gelu(x.matmul(w1)).matmul(w2));
  const loss = forward().sub(target).pow(2).mean();
  loss.backward();
  torch.noGrad(() => {
    w1.sub_(w1.grad!.mul(0.5));
    w2.sub_(w2.grad!.mul(0.5));
  });
  const loss1 = forward().sub(target).pow(2).mean();
  const probs = torch.softmax(x.narrow(0, 0, 2).matmul(w1), -1).reshape(-1);
  return {
    device,
    loss0: await loss.item(),
    loss1: await loss1.item(),
    probs: Array.from(await probs.data()),
  };
}
