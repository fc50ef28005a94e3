// @jax-js/jax on its wasm backend (its own thread pool, through the Worker shim).
import "./worker_shim.js";
import { init, defaultDevice, numpy as np, nn, lax } from "@jax-js/jax";
import { CONV, CONV_FLOPS, MATMUL_SIZES, SOFTMAX, TANH_A, TANH_B, TANH_N, guard, randomF32, report, time } from "../lib.js";

const S = "jax-js";
await init("wasm");
defaultDevice("wasm");
type A = ReturnType<typeof np.array>;

async function run(f: () => A): Promise<void> {
  const y = f();
  await y.data();
}

for (const n of MATMUL_SIZES)
  await guard(S, `matmul ${n}`, async () => {
    const a = np.array(randomF32(n * n, 1)).reshape([n, n]), b = np.array(randomF32(n * n, 2)).reshape([n, n]);
    report(S, `matmul ${n}`, "", await time(() => run(() => np.matmul(a.ref, b.ref))), 2 * n ** 3, undefined, "jax-js 0.1.25 wasm");
  });
await guard(S, "conv2d", async () => {
  const { n, c, h, w, k } = CONV;
  const x = np.array(randomF32(n * c * h * w, 3)).reshape([n, c, h, w]);
  const f = np.array(randomF32(c * c * k * k, 4, 0.1)).reshape([c, c, k, k]);
  report(S, "conv2d", "NCHW", await time(() => run(() => lax.convGeneralDilated(x.ref, f.ref, [1, 1], [[1, 1], [1, 1]]))), CONV_FLOPS);
});
await guard(S, "softmax", async () => {
  const x = np.array(randomF32(SOFTMAX.rows * SOFTMAX.cols, 5, 4)).reshape([SOFTMAX.rows, SOFTMAX.cols]);
  report(S, "softmax", "", await time(() => run(() => nn.softmax(x.ref, -1))), undefined, 8 * SOFTMAX.rows * SOFTMAX.cols);
});
await guard(S, "tanh(x*a+b)", async () => {
  const x = np.array(randomF32(TANH_N, 6, 2));
  report(S, "tanh(x*a+b)", "", await time(() => run(() => np.tanh(x.ref.mul(TANH_A).add(TANH_B)))), undefined, 8 * TANH_N);
});

// worker pools of the peer may keep the event loop alive
process.exit(0);
