// The small GPT training step of issue 18 (vocab 96, C 128, 4 heads, 2 layers, T 64, batch 4),
// written with raw ops and plain SGD (p -= lr * grad), and its deterministic initial weights and
// batches. small_step.py is the same step, op for op, in PyTorch; it reads the weights and
// batches this file writes (writeData), so both start identical.
import { writeFileSync } from "node:fs";
import * as torch from "../../packages/torchts/src/index.js";
import type { Tensor } from "../../packages/torchts/src/index.js";
const F = torch.nn.functional;

export const CFG = { V: 96, C: 128, H: 4, L: 2, T: 64, B: 4, lr: 0.03 };
const { V, C, H, L, T, B } = CFG;

/** Parameter names and shapes in a fixed order (weights are [in, out]: x @ W). */
export function paramSpecs(): [string, number[], "normal" | "ones" | "zeros" | "proj"][] {
  const s: [string, number[], "normal" | "ones" | "zeros" | "proj"][] = [["wte", [V, C], "normal"], ["wpe", [T, C], "normal"]];
  for (let l = 0; l < L; l++)
    s.push(
      [`h${l}.ln1w`, [C], "ones"], [`h${l}.ln1b`, [C], "zeros"],
      [`h${l}.wqkv`, [C, 3 * C], "normal"], [`h${l}.bqkv`, [3 * C], "zeros"],
      [`h${l}.wproj`, [C, C], "proj"], [`h${l}.bproj`, [C], "zeros"],
      [`h${l}.ln2w`, [C], "ones"], [`h${l}.ln2b`, [C], "zeros"],
      [`h${l}.wfc`, [C, 4 * C], "normal"], [`h${l}.bfc`, [4 * C], "zeros"],
      [`h${l}.wfc2`, [4 * C, C], "proj"], [`h${l}.bfc2`, [C], "zeros"],
    );
  s.push(["lnfw", [C], "ones"], ["lnfb", [C], "zeros"], ["wlm", [C, V], "normal"]);
  return s;
}

/** xorshift32 uniform in [-1, 1): the one PRNG both sides' data comes from. */
function xorshift(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return ((s >>> 0) / 4294967296 - 0.5) * 2;
  };
}

/** Initial weights (uniform with minGPT's std: 0.02, residual projections 0.02/sqrt(2L)). */
export function initialWeights(): Map<string, { shape: number[]; data: Float32Array }> {
  const r = xorshift(12345);
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, shape, kind] of paramSpecs()) {
    const n = shape.reduce((a, b) => a * b, 1);
    const d = new Float32Array(n);
    const a = Math.sqrt(3) * (kind === "proj" ? 0.02 / Math.sqrt(2 * L) : 0.02); // uniform(-a, a) has std a/sqrt(3)
    for (let i = 0; i < n; i++) d[i] = kind === "ones" ? 1 : kind === "zeros" ? 0 : a * r();
    out.set(name, { shape, data: d });
  }
  return out;
}

/** `n` batches of [B, T] inputs and next-token targets from a learnable token stream. */
export function batches(n: number): Int32Array[] {
  const r = xorshift(777);
  const out: Int32Array[] = [];
  for (let b = 0; b < n; b++) {
    const xy = new Int32Array(2 * B * T);
    for (let row = 0; row < B; row++) {
      let tok = Math.floor(((r() + 1) / 2) * V) % V;
      const seq: number[] = [tok];
      for (let t = 0; t < T; t++) {
        // mostly a fixed successor, sometimes a random jump: loss falls below ln(96) as it learns
        tok = r() > 0.6 ? Math.floor(((r() + 1) / 2) * V) % V : (tok * 7 + 3) % V;
        seq.push(tok);
      }
      for (let t = 0; t < T; t++) {
        xy[row * T + t] = seq[t]!;
        xy[B * T + row * T + t] = seq[t + 1]!;
      }
    }
    out.push(xy);
  }
  return out;
}

/** Writes weights (float32, paramSpecs order, little-endian) and batches (int32 [n, 2, B, T]) for small_step.py. */
export function writeData(dir: string, nBatches: number): void {
  const w = initialWeights();
  const parts = [...w.values()].map((p) => Buffer.from(p.data.buffer, p.data.byteOffset, p.data.byteLength));
  writeFileSync(`${dir}/weights.f32`, Buffer.concat(parts));
  writeFileSync(`${dir}/batches.i32`, Buffer.concat(batches(nBatches).map((a) => Buffer.from(a.buffer))));
  writeFileSync(`${dir}/manifest.json`, JSON.stringify({ cfg: CFG, params: paramSpecs().map(([n, s]) => ({ name: n, shape: s })), nBatches }));
}

export interface Model {
  params: Map<string, Tensor>;
  mask: Tensor;
}

export function makeModel(): Model {
  const params = new Map<string, Tensor>();
  for (const [name, p] of initialWeights()) params.set(name, torch.tensor(p.data).view(p.shape).requiresGrad_(true));
  const mask = torch.ones([T, T], { dtype: "bool" }).triu(1); // true above the diagonal: masked out
  return { params, mask };
}

export function batchTensors(xy: Int32Array): [Tensor, Tensor] {
  const both = torch.tensor(xy, { dtype: "int64" }).view(2, B, T);
  return [both.select(0, 0).contiguous(), both.select(0, 1).contiguous()];
}

export function loss(m: Model, idx: Tensor, tgt: Tensor): Tensor {
  const P = (n: string) => m.params.get(n)!;
  const hs = C / H;
  let x = F.embedding(idx, P("wte")).add(P("wpe")); // [B, T, C]
  for (let l = 0; l < L; l++) {
    const p = (n: string) => P(`h${l}.${n}`);
    let h = F.layerNorm(x, [C], p("ln1w"), p("ln1b"));
    const [q, k, v] = h.matmul(p("wqkv")).add(p("bqkv")).split(C, 2).map((t) => t.view(B, T, H, hs).transpose(1, 2));
    const att = q!.matmul(k!.transpose(-2, -1)).mul(1 / Math.sqrt(hs)).maskedFill(m.mask, -Infinity).softmax(-1);
    const y = att.matmul(v!).transpose(1, 2).reshape(B, T, C);
    x = x.add(y.matmul(p("wproj")).add(p("bproj")));
    h = F.layerNorm(x, [C], p("ln2w"), p("ln2b"));
    x = x.add(F.gelu(h.matmul(p("wfc")).add(p("bfc"))).matmul(p("wfc2")).add(p("bfc2")));
  }
  const logits = F.layerNorm(x, [C], P("lnfw"), P("lnfb")).matmul(P("wlm"));
  return F.crossEntropy(logits.view(-1, V), tgt.view(-1));
}

/** One training step: forward, backward, p -= lr * grad, grads set to None. Returns the loss. */
export function step(m: Model, idx: Tensor, tgt: Tensor): Tensor {
  const l = loss(m, idx, tgt);
  l.backward();
  torch.noGrad(() => {
    for (const p of m.params.values()) {
      p.sub_(p.grad!.mul(CFG.lr));
      p.grad = null;
    }
  });
  return l;
}
