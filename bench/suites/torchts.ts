// torchts on the cpu device: public-API ops (strict eager, fused eager) and the wasm kernels
// called directly on operands already in the shared memory (no staging copies).
import * as torch from "../../packages/torchts/src/index.js";
import {
  affineTanhF32, arenaF32, matmulF32, softmaxRowsF32,
} from "../../packages/torchts/src/device/cpu/wasm/index.js";
import { CONV, CONV_FLOPS, MATMUL_SIZES, QUICK, SOFTMAX, TANH_A, TANH_B, TANH_N, emit, guard, randomF32, report, time } from "../lib.js";

const info = torch.backends.cpu.info();
const S = info.backend === "js" ? "torchts-js" : "torchts";
const F = torch.nn.functional;
emit({ suite: S, workload: "info", note: JSON.stringify(info) });

const fromF32 = (d: Float32Array, shape: number[]) => torch.tensor(Array.from(d), { dtype: "float32" }).reshape(shape);
const jsSizes = QUICK ? [256] : [256, 512];

for (const n of info.backend === "js" ? jsSizes : MATMUL_SIZES) {
  await guard(S, `matmul ${n}`, async () => {
    const a = torch.randn(n, n), b = torch.randn(n, n);
    report(S, `matmul ${n}`, "strict", await time(() => torch.matmul(a, b)), 2 * n ** 3);
  });
  if (info.backend === "js") continue;
  await guard(S, `matmul ${n}`, async () => {
    const A = arenaF32(n * n)!, B = arenaF32(n * n)!, C = arenaF32(n * n)!;
    A.data.set(randomF32(n * n, 1));
    B.data.set(randomF32(n * n, 2));
    report(S, `matmul ${n}`, "kernel", await time(() => matmulF32(n, n, n, A.data, 0, n, 1, B.data, 0, n, 1, C.data, 0)), 2 * n ** 3);
    [A, B, C].forEach((x) => x.release());
  });
}

await guard(S, "conv2d", async () => {
  const { n, c, h, w, k } = CONV;
  const x = fromF32(randomF32(n * c * h * w, 3), [n, c, h, w]);
  const wt = fromF32(randomF32(c * c * k * k, 4, 0.1), [c, c, k, k]);
  report(S, "conv2d", "strict (im2col + wasm gemm)", await time(() => F.conv2d(x, wt, null, { padding: 1 })), CONV_FLOPS);
});

const SM = SOFTMAX.rows * SOFTMAX.cols;
await guard(S, "softmax", async () => {
  const x = fromF32(randomF32(SM, 5, 4), [SOFTMAX.rows, SOFTMAX.cols]);
  report(S, "softmax", "strict (composed ops)", await time(() => torch.softmax(x, -1)), undefined, 8 * SM);
});
if (info.backend !== "js")
  await guard(S, "softmax", async () => {
    const X = arenaF32(SM)!, Y = arenaF32(SM)!;
    X.data.set(randomF32(SM, 5, 4));
    report(S, "softmax", "kernel", await time(() => softmaxRowsF32(X.data, 0, SOFTMAX.rows, SOFTMAX.cols, Y.data)), undefined, 8 * SM);
    X.release();
    Y.release();
  });

await guard(S, "tanh(x*a+b)", async () => {
  const x = fromF32(randomF32(TANH_N, 6, 2), [TANH_N]);
  report(S, "tanh(x*a+b)", "strict (3 ops)", await time(() => x.mul(TANH_A).add(TANH_B).tanh()), undefined, 8 * TANH_N);
  const fused = () =>
    torch.withEagerMode("fused", () => {
      const y = x.mul(TANH_A).add(TANH_B).tanh();
      torch.sync();
      return y;
    });
  report(S, "tanh(x*a+b)", "fused eager", await time(fused), undefined, 8 * TANH_N);
});
if (info.backend !== "js")
  await guard(S, "tanh(x*a+b)", async () => {
    const X = arenaF32(TANH_N)!, Y = arenaF32(TANH_N)!;
    X.data.set(randomF32(TANH_N, 6, 2));
    report(S, "tanh(x*a+b)", "kernel", await time(() => affineTanhF32(X.data, 0, TANH_N, TANH_A, TANH_B, Y.data)), undefined, 8 * TANH_N);
    // the same kernel on plain typed arrays: the cost of staging through the shared memory
    const x = X.data.slice(), y = new Float32Array(TANH_N);
    report(S, "tanh(x*a+b)", "kernel, staged copies", await time(() => affineTanhF32(x, 0, TANH_N, TANH_A, TANH_B, y)), undefined, 8 * TANH_N,
      "operands outside the wasm memory are copied in and out per call");
    X.release();
    Y.release();
  });
