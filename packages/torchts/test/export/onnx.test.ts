// torch.onnx.export, checked by ONNX Runtime (onnxruntime-node): every model's .onnx gives the
// torchts outputs within 1e-4 at the sample sizes and at two other sizes of its dynamic axes;
// dynamicAxes (PyTorch's legacy form), opset 18, external data, and errors naming the op.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { allCases, maxAbsDiff, mingpt, resnet18 } from "./models.js";
import { ort, runOrt } from "./ort.js";
import onnxPkg from "onnx-proto";

const tmp = () => mkdtempSync(join(tmpdir(), "torchts-onnx-"));

test("onnx: minGPT, the golden HF models, ResNet-18 and the UNet run in onnxruntime at three sizes within 1e-4", async () => {
  const dir = tmp();
  try {
    for (const c of await allCases()) {
      const path = join(dir, `${c.name}.onnx`);
      const r = await torch.onnx.export(c.module, c.args, path, { dynamicShapes: c.dynamicShapes });
      const sess = await ort.InferenceSession.create(path);
      assert.deepEqual(sess.inputNames, r.inputNames);
      for (const [i, a] of [c.args, ...c.others].entries()) {
        const want = c.pick(torch.noGrad(() => (c.module.forward as (...x: unknown[]) => unknown)(...a)));
        const [got] = await runOrt(sess, a as Tensor[]);
        const d = await maxAbsDiff(got!, want);
        assert.ok(d < 1e-4, `${c.name}: input set ${i} (output ${want.shape}): ${d} from torchts`);
      }
      await sess.release();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("onnx: dynamicAxes and opset 18 (minGPT); the model declares its dim_params", async () => {
  const c = await mingpt();
  const dir = tmp();
  try {
    const path = join(dir, "gpt.onnx");
    const r = await torch.onnx.export(c.module, c.args, path, { inputNames: ["idx"], dynamicAxes: { idx: { 0: "batch", 1: "seq" } }, opsetVersion: 18 });
    assert.deepEqual(r.outputNames, ["logits"]);
    const model = onnxPkg.onnx.ModelProto.decode(torch.onnx.toBytes(r.program, [], { opsetVersion: 18, inputNames: ["idx"] }));
    assert.equal(Number(model.opsetImport[0]!.version), 18);
    const dims = (v: onnxPkg.onnx.IValueInfoProto) => v.type!.tensorType!.shape!.dim!.map((d) => d.dimParam || Number(d.dimValue));
    assert.deepEqual(dims(model.graph!.input![0]!), ["batch", "seq"]);
    assert.deepEqual(dims(model.graph!.output![0]!), ["batch", "seq", 65]);
    const sess = await ort.InferenceSession.create(path);
    for (const [b, t] of [[4, 3], [1, 32]] as const) {
      const x = torch.randint(0, 65, [b, t]);
      const want = torch.noGrad(() => (c.module as unknown as { forward(x: Tensor): { logits: Tensor } }).forward(x).logits);
      const [got] = await runOrt(sess, [x]);
      assert.ok((await maxAbsDiff(got!, want)) < 1e-4, `[${b}, ${t}]`);
    }
    await sess.release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("onnx: external data (forced here; automatic above 2 GB) loads in onnxruntime", async () => {
  const c = await resnet18();
  const dir = tmp();
  try {
    const path = join(dir, "resnet.onnx");
    const r = await torch.onnx.export(c.module, c.args, path, { dynamicShapes: [{ 0: torch.export.Dim("batch", { max: 4 }) }], externalData: true });
    assert.equal(r.dataPath, `${path}.data`);
    assert.ok(existsSync(r.dataPath!));
    assert.ok(statSync(path).size < 200_000, `the graph file holds no weights (${statSync(path).size} bytes)`);
    assert.ok(statSync(r.dataPath!).size > 40_000_000, "the data file holds the float32 weights");
    const sess = await ort.InferenceSession.create(path);
    const x = torch.randn(3, 3, 32, 32);
    const [got] = await runOrt(sess, [x]);
    const want = torch.noGrad(() => (c.module as unknown as { forward(x: Tensor): Tensor }).forward(x));
    assert.ok((await maxAbsDiff(got!, want)) < 1e-4);
    await sess.release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("onnx: an op ONNX cannot express names the op and the call site; opset below 17 is refused", async () => {
  const pool = (x: Tensor) => torch.nn.functional.adaptiveAvgPool2d(x, 2);
  const x = torch.randn(1, 2, 8, 8);
  const dyn = [{ 2: torch.export.Dim("h", { min: 4, max: 32, multipleOf: 2 }) }];
  assert.throws(() => torch.onnx.toBytes(pool, [x], { dynamicShapes: dyn }), /torch\.onnx\.export: avgPool2d \(from .*onnx\.test\.ts:\d+.*\): kernel depends on a dynamic dim/);
  assert.throws(() => torch.onnx.toBytes(pool, [x], { opsetVersion: 13 }), /opsetVersion must be between 17 and 21/);
});
