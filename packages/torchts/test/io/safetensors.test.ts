import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";

const st = torch.safetensors;
const FIXTURE = fileURLToPath(new URL("../fixtures/golden_ops/cases/", import.meta.url));

/** Raw safetensors bytes from a header object and a data section of `dataLen` bytes. */
function raw(header: unknown, dataLen: number, headerLen?: bigint): Uint8Array {
  const json = new TextEncoder().encode(typeof header === "string" ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + dataLen);
  new DataView(out.buffer).setBigUint64(0, headerLen ?? BigInt(json.length), true);
  out.set(json, 8);
  return out;
}

test("round trip of every dtype, shapes and metadata", async () => {
  const tensors: Record<string, Tensor> = {
    f32: torch.tensor([[1.5, -2.25, 3.0e-8], [Infinity, -0, 7]], { dtype: "float32" }),
    f64: torch.tensor([Math.PI, -1e300, 5e-324], { dtype: "float64" }),
    f16: torch.tensor([1.0009765625, 65504, -0.5, 5.960464477539063e-8], { dtype: "float16" }),
    bf16: torch.tensor([1, 1.0078125, -3.40e38, 9.18354961579912e-41], { dtype: "bfloat16" }),
    i64: torch.tensor([0, -1, 16777217, 1099511627777, -(2 ** 53 - 1)], { dtype: "int64" }),
    i32: torch.tensor([[-2147483648, 2147483647]], { dtype: "int32" }),
    i8: torch.tensor([-128, 127, 0], { dtype: "int8" }),
    u8: torch.tensor([0, 255, 17], { dtype: "uint8" }),
    b: torch.tensor([true, false, true], { dtype: "bool" }),
    scalar: torch.tensor(2.5),
    empty: torch.zeros([0, 3]),
  };
  const bytes = st.save(tensors, { format: "pt", note: "golden" });
  // the data section starts 8-byte aligned (header padded with spaces)
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  assert.equal((8 + n) % 8, 0);
  const back = st.load(bytes);
  assert.deepEqual(Object.keys(back).sort(), Object.keys(tensors).sort());
  for (const [k, t] of Object.entries(tensors)) {
    assert.equal(back[k]!.dtype, t.dtype, k);
    assert.deepEqual(back[k]!.shape, t.shape, k);
    assert.deepEqual(await back[k]!.tolist(), await t.tolist(), k);
  }
  assert.deepEqual(st.loadMetadata(bytes), { format: "pt", note: "golden" });
  assert.deepEqual(await back.i64!.tolist(), [0, -1, 16777217, 1099511627777, -(2 ** 53 - 1)]);
  assert.deepEqual(await back.f16!.tolist(), [1.0009765625, 65504, -0.5, 5.960464477539063e-8]);
});

test("save writes non-contiguous views in logical order", async () => {
  const x = torch.arange(6, { dtype: "float32" }).reshape(2, 3).t();
  const back = st.load(st.save({ x }));
  assert.deepEqual(back.x!.shape, [3, 2]);
  assert.deepEqual(await back.x!.tolist(), [[0, 3], [1, 4], [2, 5]]);
});

test("the header layout matches the reference writer", () => {
  const bytes = st.save({ b: torch.tensor([1, 2], { dtype: "int32" }), a: torch.tensor([3], { dtype: "int64" }) });
  const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
  const h = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  // 8-byte dtypes first, then by name: every tensor stays aligned to its item size
  assert.deepEqual(h, {
    a: { dtype: "I64", shape: [1], data_offsets: [0, 8] },
    b: { dtype: "I32", shape: [2], data_offsets: [8, 16] },
  });
  assert.equal(bytes.length, 8 + n + 16);
});

test("loads PyTorch-written golden files (F16 and I64 values checked with numpy)", async () => {
  const f16 = await st.loadFile(join(FIXTURE, "cast__to_float16.safetensors"));
  assert.equal(f16["out.0"]!.dtype, "float16");
  assert.deepEqual(f16["out.0"]!.shape, [40]);
  const v = (await f16["out.0"]!.tolist()) as number[];
  assert.deepEqual(v.slice(0, 8), [65504, Infinity, Infinity, -Infinity, 5.960464477539063e-8, 5.960464477539063e-8, 0, 1.0009765625]);
  const i64 = await st.loadFile(join(FIXTURE, "cast__int_to_float.safetensors"));
  assert.equal(i64["in.a"]!.dtype, "int64");
  assert.deepEqual(await i64["in.a"]!.tolist(), [0, -1, 16777217, 1099511627777]);
  assert.deepEqual(await i64["out.0"]!.tolist(), [0, -1, 16777216, 1099511627776]);
  const bytes = new Uint8Array(readFileSync(join(FIXTURE, "cast__int_to_float.safetensors")));
  assert.deepEqual(st.loadMetadata(bytes), { case: "cast__int_to_float" });
});

test("saveFile is atomic and loadFile reads it back", async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-st-"));
  try {
    const path = join(dir, "model.safetensors");
    writeFileSync(path, "old contents");
    const w = torch.tensor([[1, 2], [3, 4]], { dtype: "float32" });
    await st.saveFile({ w }, path, { step: "3" });
    assert.deepEqual(readdirSync(dir), ["model.safetensors"]); // no temporary file left behind
    const back = await st.loadFile(path);
    assert.deepEqual(await back.w!.tolist(), [[1, 2], [3, 4]]);
    assert.deepEqual(st.loadMetadata(new Uint8Array(readFileSync(path))), { step: "3" });
    await assert.rejects(st.saveFile({ w }, join(dir, "missing", "x.safetensors")));
    assert.deepEqual(readdirSync(dir), ["model.safetensors"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("errors name the file and the problem", async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-st-"));
  try {
    const path = join(dir, "broken.safetensors");
    writeFileSync(path, new Uint8Array([1, 2, 3]));
    await assert.rejects(st.loadFile(path), (e: Error) => e.message.includes(path) && /truncated file: 3 bytes/.test(e.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("malformed files are rejected with a clear message", () => {
  const f32 = (offs: [number, number], shape = [2]) => ({ dtype: "F32", shape, data_offsets: offs });
  const cases: [string, Uint8Array, RegExp][] = [
    ["truncated", new Uint8Array(5), /truncated file: 5 bytes/],
    ["header longer than file", raw({ a: f32([0, 8]) }, 8, 1000n), /header length 1000 is larger than the rest of the file/],
    ["absurd header length", raw({}, 0, 2n ** 60n), /header length \d+ is too large/],
    ["bad JSON", raw("{not json", 0), /bad JSON header/],
    ["header not an object", raw("[1, 2]", 0), /bad JSON header: not an object/],
    ["unknown dtype", raw({ a: { dtype: "C64", shape: [1], data_offsets: [0, 8] } }, 8), /tensor 'a': unknown dtype 'C64'/],
    ["bad shape", raw({ a: { dtype: "F32", shape: [-1], data_offsets: [0, 4] } }, 4), /tensor 'a': bad shape \[-1\]/],
    ["bad offsets", raw({ a: { dtype: "F32", shape: [1], data_offsets: [4, 0] } }, 4), /tensor 'a': bad data_offsets \[4,0\]/],
    ["offsets out of range", raw({ a: f32([0, 8]) }, 4), /tensor 'a': data_offsets \[0, 8\] out of range \(data section is 4 bytes\)/],
    ["shape/size mismatch", raw({ a: f32([0, 12]) }, 12), /tensor 'a': shape \[2\] of F32 needs 8 bytes but data_offsets span 12/],
    ["overlap", raw({ a: f32([0, 8]), b: f32([4, 12]) }, 12), /tensor 'b' overlaps tensor 'a'/],
    ["hole", raw({ a: f32([0, 8]), b: f32([12, 20]) }, 20), /non-contiguous data: 4 unused bytes before tensor 'b'/],
    ["trailing bytes", raw({ a: f32([0, 8]) }, 10), /non-contiguous data: 2 trailing bytes/],
  ];
  for (const [what, bytes, re] of cases)
    assert.throws(() => st.load(bytes, "weights.safetensors"), (e: Error) => {
      assert.match(e.message, /^safetensors: weights\.safetensors: /, what);
      assert.match(e.message, re, what);
      return true;
    });
});

test("save validates its arguments", () => {
  const t = torch.zeros(2);
  assert.throws(() => st.save({ __metadata__: t }), /'__metadata__' is reserved/);
  assert.throws(() => st.save({ t }, { n: 3 as unknown as string }), /metadata value for 'n' must be a string/);
});
