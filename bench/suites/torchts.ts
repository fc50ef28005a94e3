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
    // results are disposed as the other suites do (tfjs: y.dispose()): a dropped result keeps its
    // arena block until GC, and the next call then pays first-touch page faults on fresh memory
    report(S, `matmul ${n}`, "strict", await time(() => torch.matmul(a, b).dispose()), 2 * n ** 3);
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
  report(S, "conv2d", info.backend === "js" ? "strict (direct JS loops)" : "strict (im2col panels + wasm gemm)", await time(() => F.conv2d(x, wt, null, { padding: 1 }).dispose()), CONV_FLOPS);
});

const SM = SOFTMAX.rows * SOFTMAX.cols;
// API rows free what they create (as a training step's memory is reused), so they time the ops,
// not first-touch page faults of fresh memory. (Fused intermediates are never materialized: the
// result is all there is to free; torch.scope around a fused flush currently keeps its result.)
const freed = (f: () => torch.Tensor) => () => torch.scope(() => void f());
const fusedSync = (f: () => torch.Tensor) => () =>
  torch.withEagerMode("fused", () => {
    const y = f();
    torch.sync();
    y.dispose();
  });
await guard(S, "softmax", async () => {
  const x = fromF32(randomF32(SM, 5, 4), [SOFTMAX.rows, SOFTMAX.cols]);
  report(S, "softmax", "strict", await time(freed(() => torch.softmax(x, -1))), undefined, 8 * SM, "cpu softmax composite (wasm row kernel)");
  report(S, "softmax", "fused eager", await time(fusedSync(() => torch.softmax(x, -1))), undefined, 8 * SM);
  torch.backends.cpu.setCompositeEnabled("softmax", false);
  try {
    report(S, "softmax", "strict (composed ops)", await time(freed(() => torch.softmax(x, -1))), undefined, 8 * SM);
    report(S, "softmax", "fused eager (composed ops)", await time(fusedSync(() => torch.softmax(x, -1))), undefined, 8 * SM);
  } finally {
    torch.backends.cpu.setCompositeEnabled("softmax", true);
  }
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
  report(S, "tanh(x*a+b)", "strict (3 ops)", await time(freed(() => x.mul(TANH_A).add(TANH_B).tanh())), undefined, 8 * TANH_N);
  report(S, "tanh(x*a+b)", "fused eager", await time(fusedSync(() => x.mul(TANH_A).add(TANH_B).tanh())), undefined, 8 * TANH_N,
    "one run-time generated wasm kernel");
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
