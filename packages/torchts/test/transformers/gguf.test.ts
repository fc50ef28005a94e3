// GGUF: llama-family golden models written as F32 / F16 / Q8_0 / Q4_0 and read back; ggml's
// block formats checked by hand on known values.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/index.js";
import {
  AutoModelForCausalLM, GGML_TYPE, decodeGGUFTensor, loadGGUF, parseGGUF, quantizeQ4_0, quantizeQ8_0, saveGGUF, toGGUF,
} from "../../src/transformers/index.js";
import { expected, fixtureDir, maxAbsDiff } from "./helpers.js";

test("Q8_0 and Q4_0 blocks follow ggml's reference quantizers", () => {
  const x = Float32Array.from({ length: 32 }, (_, i) => (i - 16) / 4); // -4 .. 3.75
  const q8 = quantizeQ8_0(x);
  assert.equal(q8.length, 34);
  const dv8 = new DataView(q8.buffer);
  assert.equal(dv8.getInt8(2), -127); // -4 / (4/127)
  assert.equal(dv8.getInt8(2 + 31), Math.round(3.75 / (4 / 127)));
  const info = { name: "t", shape: [32], type: GGML_TYPE.Q8_0, offset: 0 };
  const back8 = decodeGGUFTensor(q8, info);
  for (let i = 0; i < 32; i++) assert.ok(Math.abs(back8[i]! - x[i]!) <= 4 / 127 / 2 + 1e-3);
  const q4 = quantizeQ4_0(x);
  assert.equal(q4.length, 18);
  // max-magnitude value is -4, so d = -4 / -8 = 0.5 and -4 maps to nibble 0
  assert.equal(torch.tensor(new Uint8Array(q4.buffer, 0, 2), { dtype: "uint8" }).shape[0], 2);
  assert.equal(new DataView(q4.buffer).getUint16(0, true), 0x3800); // f16 0.5
  assert.equal(q4[2]! & 15, 0);
  const back4 = decodeGGUFTensor(q4, { ...info, type: GGML_TYPE.Q4_0 });
  for (let i = 0; i < 32; i++) assert.ok(Math.abs(back4[i]! - x[i]!) <= 0.25 + 1e-6, `q4_0 value ${i}`);
});

test("llama-family models round-trip through GGUF (f32 exact; f16/q8_0/q4_0 close; greedy kept for f32/f16)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-gguf-"));
  try {
    for (const name of ["llama_gqa", "qwen2_tied", "qwen3_qknorm"]) {
      const src = await AutoModelForCausalLM.fromPretrained(fixtureDir(name));
      const p = expected(name).prompts[0]!;
      const ids = torch.tensor([p.input_ids]);
      const ref = torch.noGrad(() => src.forward(ids).logits);
      for (const [type, tol] of [["f32", 1e-5], ["f16", 0.1], ["q8_0", 0.5], ["q4_0", 6]] as const) {
        const file = join(dir, `${name}.${type}.gguf`);
        await saveGGUF(src, file, { type });
        const back = await loadGGUF(file);
        assert.equal(back.constructor.name, src.constructor.name);
        assert.equal(back.config.numKeyValueHeads, src.config.numKeyValueHeads);
        assert.equal(back.config.headDim, src.config.headDim);
        assert.equal(back.config.tieWordEmbeddings, src.config.tieWordEmbeddings);
        const d = await maxAbsDiff(torch.noGrad(() => back.forward(ids).logits.float()), ref);
        assert.ok(d < tol, `${name} ${type}: logits differ by ${d}`);
        // every weight within one quantization step of the original (q4_0: |d| <= block max / 8)
        const step = { f32: 0, f16: 1 / 1024, q8_0: 1 / 127, q4_0: 1 / 8 }[type];
        for (const [k, w] of src.namedParameters()) {
          const err = await maxAbsDiff(back.getParameter(k), w);
          const amax = await w.abs().max().item();
          assert.ok(err <= amax * step * 1.01 + 1e-7, `${name} ${type}: ${k} differs by ${err} (max |w| ${amax})`);
        }
        if (type === "f32" || type === "f16") {
          const g = await back.generate(p.input_ids, { maxNewTokens: 16, stopTokenIds: [] });
          assert.deepEqual(g.newTokens[0], p.greedy_continuation, `${name} ${type}: greedy`);
        }
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("GGUF header: llama metadata, ggml dims innermost first, Q/K rows permuted, clear errors", async () => {
  const src = await AutoModelForCausalLM.fromPretrained(fixtureDir("llama_gqa"));
  const bytes = await toGGUF(src, { type: "q8_0" });
  const f = parseGGUF(bytes);
  assert.equal(f.version, 3);
  assert.equal(f.metadata.get("general.architecture"), "llama");
  assert.equal(f.metadata.get("llama.attention.head_count_kv"), 2);
  assert.equal(f.metadata.get("llama.rope.dimension_count"), 16);
  const q = f.tensors.find((t) => t.name === "blk.0.attn_q.weight")!;
  assert.deepEqual(q.shape, [64, 64]);
  assert.equal(q.type, GGML_TYPE.Q8_0);
  assert.equal(f.tensors.find((t) => t.name === "blk.0.attn_norm.weight")!.type, GGML_TYPE.F32);
  assert.ok(f.tensors.some((t) => t.name === "output.weight"));
  // rows of each head are interleaved: GGUF row 1 is HF row hd/2 (= 8) of head 0
  const f32 = parseGGUF(await toGGUF(src, { type: "f32" }));
  const qf = decodeGGUFTensor(await toGGUF(src, { type: "f32" }), f32.tensors.find((t) => t.name === "blk.0.attn_q.weight")!);
  const hf = (await src.getParameter("model.layers.0.self_attn.q_proj.weight").data()) as Float32Array;
  assert.deepEqual([...qf.subarray(64, 128)], [...hf.subarray(8 * 64, 9 * 64)]);
  const gpt2 = await AutoModelForCausalLM.fromPretrained(fixtureDir("gpt2"));
  await assert.rejects(toGGUF(gpt2), /model_type 'gpt2' is not supported/);
  assert.throws(() => parseGGUF(new TextEncoder().encode("GGML0000")), /bad magic/);
});
