// `torchts convert`: a golden Hugging Face folder to .onnx (onnxruntime-node reproduces
// transformers' logits within 1e-4, batch and sequence dynamic) and to an int8 .tflite with one
// signature per --seq-len; a torch.export.save file to both; usage errors exit 2.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";
import { TensorType } from "../../src/export/litert/schema.js";
import { maxAbsDiff, mingpt } from "./models.js";
import { ort, runOrt } from "./ort.js";
import { readTflite } from "./tflite_reader.js";

const pkg = fileURLToPath(new URL("../../", import.meta.url));
const hfDir = (n: string) => join(pkg, "test/fixtures/hf", n);

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["--import", "tsx", "src/cli.ts", "convert", ...args], { cwd: pkg }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test("torchts convert: a Hugging Face folder to ONNX (transformers' logits within 1e-4) and to an int8 .tflite", async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-convert-"));
  try {
    const onnxPath = join(dir, "llama.onnx");
    const tflitePath = join(dir, "llama_int8.tflite");
    const [a, b] = await Promise.all([
      cli(["--model", hfDir("llama_gqa"), "--to", "onnx", "--out", onnxPath]),
      cli(["--model", hfDir("llama_gqa"), "--to", "tflite", "--quantize", "int8", "--seq-len", "8,16", "--out", tflitePath]),
    ]);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(b.code, 0, b.stderr);
    const info = JSON.parse(a.stdout) as { out: string; inputs: string[]; outputs: string[]; dims: string[] };
    assert.deepEqual([info.inputs, info.outputs, info.dims], [["input_ids", "attention_mask"], ["logits"], ["batch", "sequence"]]);
    // transformers' logits for the golden prompt, and a batch of two at another length
    const exp = JSON.parse(readFileSync(join(hfDir("llama_gqa"), "expected.json"), "utf8")) as { prompts: { full_sequence: number[] }[] };
    const ref = await torch.safetensors.loadFile(join(hfDir("llama_gqa"), "expected_logits.safetensors"));
    const want = ref["full_logits.0"]!;
    const ids = torch.tensor([exp.prompts[0]!.full_sequence.slice(0, want.shape[1])], { dtype: "int64" });
    const sess = await ort.InferenceSession.create(onnxPath);
    const [got] = await runOrt(sess, [ids, torch.onesLike(ids)]);
    assert.ok((await maxAbsDiff(got!, want)) < 1e-4, "ONNX logits vs transformers");
    const two = torch.cat([ids.narrow(1, 0, 13), ids.narrow(1, 5, 13)], 0);
    const [got2] = await runOrt(sess, [two, torch.onesLike(two)]);
    assert.deepEqual(got2!.shape, [2, 13, 256]);
    await sess.release();
    // the .tflite: two signatures, int8 weights for every projection
    const t = JSON.parse(b.stdout) as { bytes: number; signatures: { key: string; inputs: { name: string; shape: number[] }[] }[] };
    assert.deepEqual(t.signatures.map((s) => [s.key, s.inputs.map((i) => i.name), s.inputs[0]!.shape]), [["serving_default", ["input_ids", "attention_mask"], [1, 8]], ["seq_16", ["input_ids", "attention_mask"], [1, 16]]]);
    const r = readTflite(new Uint8Array(readFileSync(tflitePath)));
    const int8 = r.subgraphs[0]!.tensors.filter((x) => x.type === TensorType.INT8);
    assert.equal(int8.length, 4 * 7 + 1, "q/k/v/o/gate/up/down of 4 layers and lm_head are int8");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("torchts convert: a torch.export.save file to ONNX and .tflite; usage errors", async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-convert-"));
  try {
    const c = await mingpt();
    const ep = torch.export.export(c.module, c.args, { dynamicShapes: c.dynamicShapes });
    const file = join(dir, "gpt.pt2");
    await torch.export.save(ep, file);
    const [a, b] = await Promise.all([cli(["--model", file, "--to", "onnx", "--out", join(dir, "gpt.onnx")]), cli(["--model", file, "--to", "tflite", "--out", join(dir, "gpt.tflite")])]);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(b.code, 0, b.stderr);
    const sess = await ort.InferenceSession.create(join(dir, "gpt.onnx"));
    const x = torch.randint(0, 65, [3, 11]);
    const [got] = await runOrt(sess, [x]);
    const want = torch.noGrad(() => (c.module as unknown as { forward(x: torch.Tensor): { logits: torch.Tensor } }).forward(x).logits);
    assert.ok((await maxAbsDiff(got!, want)) < 1e-4);
    await sess.release();
    const sig = (JSON.parse(b.stdout) as { signatures: { inputs: { shape: number[] }[] }[] }).signatures;
    assert.deepEqual(sig[0]!.inputs[0]!.shape, [2, 8], "the .tflite is written at the export's sample sizes");
    const usage = await Promise.all([cli(["--model", file]), cli(["--model", file, "--to", "onnx", "--quantize", "int8"]), cli(["--to", "onnx"]), cli(["--model", file, "--to", "tflite", "--seq-len", "0"])]);
    for (const u of usage) {
      assert.equal(u.code, 2, u.stderr);
      assert.match(u.stderr, /torchts convert: .*\nusage: torchts convert/);
    }
    const missing = await cli(["--model", join(dir, "nope"), "--to", "onnx"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /does not exist/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
