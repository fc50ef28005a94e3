// @tensorflow/tfjs-backend-wasm (XNNPACK, SIMD; Node gives it no threads).
import * as tf from "@tensorflow/tfjs-core";
import { setThreadsCount } from "@tensorflow/tfjs-backend-wasm";
import { CONV, CONV_FLOPS, MATMUL_SIZES, SOFTMAX, TANH_A, TANH_B, TANH_N, guard, randomF32, report, time } from "../lib.js";

const S = "tfjs-wasm";
setThreadsCount(2);
await tf.setBackend("wasm");
await tf.ready();
const note = `tfjs ${tf.version_core}, backend ${tf.getBackend()}`;

async function run(f: () => tf.Tensor): Promise<void> {
  const y = f();
  await y.data();
  y.dispose();
}

for (const n of MATMUL_SIZES)
  await guard(S, `matmul ${n}`, async () => {
    const a = tf.tensor2d(randomF32(n * n, 1), [n, n]), b = tf.tensor2d(randomF32(n * n, 2), [n, n]);
    report(S, `matmul ${n}`, "", await time(() => run(() => tf.matMul(a, b))), 2 * n ** 3, undefined, note);
    a.dispose();
    b.dispose();
  });
await guard(S, "conv2d", async () => {
  const { n, c, h, w, k } = CONV;
  const x = tf.tensor4d(randomF32(n * h * w * c, 3), [n, h, w, c]); // NHWC, tfjs's layout
  const f = tf.tensor4d(randomF32(k * k * c * c, 4, 0.1), [k, k, c, c]);
  report(S, "conv2d", "NHWC", await time(() => run(() => tf.conv2d(x, f, 1, "same"))), CONV_FLOPS);
});
await guard(S, "softmax", async () => {
  const x = tf.tensor2d(randomF32(SOFTMAX.rows * SOFTMAX.cols, 5, 4), [SOFTMAX.rows, SOFTMAX.cols]);
  report(S, "softmax", "", await time(() => run(() => tf.softmax(x))), undefined, 8 * SOFTMAX.rows * SOFTMAX.cols);
});
await guard(S, "tanh(x*a+b)", async () => {
  const x = tf.tensor1d(randomF32(TANH_N, 6, 2));
  const fn = () => tf.tidy(() => tf.tanh(tf.add(tf.mul(x, TANH_A), TANH_B)));
  report(S, "tanh(x*a+b)", "3 ops", await time(() => run(fn)), undefined, 8 * TANH_N);
});

// worker pools of the peer may keep the event loop alive
process.exit(0);
