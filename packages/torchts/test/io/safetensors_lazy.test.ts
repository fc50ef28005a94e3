// Lazy reading (header first, each tensor's bytes on demand), sharded Hugging Face checkpoints,
// and the safetensors dtypes torchts widens on load.
import { test } from "node:test";
import assert from "node:assert/strict";
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/index.js";

const st = torch.safetensors;

function withDir(f: (dir: string) => Promise<void>): () => Promise<void> {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), "torchts-lazy-"));
    try {
      await f(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

/** Raw file bytes for a header and data section. */
function raw(header: unknown, data: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

test(
  "one tensor of a 3 GB file is read without reading the file",
  withDir(async (dir) => {
    // A sparse file: a 3 GB U8 tensor then a small F32 one. Reading it whole would exceed
    // Node's 2 GB buffer limit, so this only passes if just the header and 'small' are read.
    const big = 3 * 2 ** 30;
    const header = JSON.stringify({
      __metadata__: { note: "sparse" },
      big: { dtype: "U8", shape: [big], data_offsets: [0, big] },
      small: { dtype: "F32", shape: [2], data_offsets: [big, big + 8] },
    });
    const json = new TextEncoder().encode(header);
    const path = join(dir, "huge.safetensors");
    const fd = openSync(path, "w");
    const len = new Uint8Array(8);
    new DataView(len.buffer).setBigUint64(0, BigInt(json.length), true);
    writeSync(fd, len, 0, 8, 0);
    writeSync(fd, json, 0, json.length, 8);
    writeSync(fd, new Uint8Array(new Float32Array([1.5, -2]).buffer), 0, 8, 8 + json.length + big);
    closeSync(fd);
    const f = await st.safeOpen(path);
    try {
      assert.deepEqual(f.keys().sort(), ["big", "small"]);
      assert.deepEqual(f.metadata(), { note: "sparse" });
      assert.deepEqual(f.info("big"), { dtype: "uint8", fileDtype: "U8", shape: [big], byteLength: big });
      assert.deepEqual(await (await f.getTensor("small")).tolist(), [1.5, -2]);
      await assert.rejects(f.getTensor("nope"), /no tensor named 'nope'/);
    } finally {
      await f.close();
    }
    await assert.rejects(f.getTensor("small"), /file is closed/);
    assert.deepEqual(await (await st.loadFile(path, { keys: ["small"] })).small!.tolist(), [1.5, -2]);
    assert.deepEqual(await st.loadFileMetadata(path), { note: "sparse" });
  }),
);

test(
  "a file truncated after a valid header is rejected before any tensor is read",
  withDir(async (dir) => {
    const bytes = st.save({ a: torch.ones(4), b: torch.zeros(4) });
    const path = join(dir, "t.safetensors");
    writeFileSync(path, bytes.subarray(0, bytes.length - 3));
    await assert.rejects(st.safeOpen(path), (e: Error) => e.message.startsWith(`safetensors: ${path}: `) && /data_offsets .* out of range/.test(e.message));
  }),
);

test("dtypes torchts lacks are widened exactly on load", async () => {
  const i16 = new Uint8Array(new Int16Array([-32768, 32767, -1]).buffer);
  const u16 = new Uint8Array(new Uint16Array([0, 65535, 7]).buffer);
  const u32 = new Uint8Array(new Uint32Array([4294967295, 1]).buffer);
  const u64 = new Uint8Array(new BigUint64Array([2n ** 53n, 3n]).buffer);
  // float8: 0x38 = 1.0 in E4M3 (bias 7), 0x3c = 1.0 in E5M2 (bias 15); 0x7f is E4M3's NaN, 0x7c E5M2's +inf
  const e4 = new Uint8Array([0x38, 0xb8, 0x7e, 0x01, 0x7f]);
  const e5 = new Uint8Array([0x3c, 0xc0, 0x7b, 0x01, 0x7c]);
  const parts = [i16, u16, u32, u64, e4, e5];
  const names = ["i16", "u16", "u32", "u64", "e4", "e5"];
  const dts = ["I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2"];
  const shapes = [[3], [3], [2], [2], [5], [5]];
  const header: Record<string, unknown> = {};
  let pos = 0;
  parts.forEach((p, i) => {
    header[names[i]!] = { dtype: dts[i], shape: shapes[i], data_offsets: [pos, pos + p.length] };
    pos += p.length;
  });
  const data = new Uint8Array(pos);
  pos = 0;
  for (const p of parts) {
    data.set(p, pos);
    pos += p.length;
  }
  const t = st.load(raw(header, data));
  assert.equal(t.i16!.dtype, "int32");
  assert.deepEqual(await t.i16!.tolist(), [-32768, 32767, -1]);
  assert.deepEqual(await t.u16!.tolist(), [0, 65535, 7]);
  assert.equal(t.u32!.dtype, "int64");
  assert.deepEqual(await t.u32!.tolist(), [4294967295, 1]);
  assert.deepEqual(await t.u64!.tolist(), [2 ** 53, 3]);
  assert.equal(t.e4!.dtype, "float32");
  assert.deepEqual(await t.e4!.tolist(), [1, -1, 448, 2 ** -9, NaN]);
  assert.deepEqual(await t.e5!.tolist(), [1, -2, 57344, 2 ** -16, Infinity]);
});

test(
  "sharded save/load in Hugging Face layout",
  withDir(async (dir) => {
    torch.manualSeed(0);
    const tensors: Record<string, torch.Tensor> = {};
    for (let i = 0; i < 5; i++) tensors[`layers.${i}.weight`] = torch.randn(16, 16); // 1 KiB each
    tensors["lm_head.weight"] = torch.randn(40, 16); // 2.5 KiB: larger than a shard, gets its own
    const { files, index } = await st.saveSharded(tensors, dir, { maxShardSize: 2100 });
    assert.deepEqual(files, [
      "model-00001-of-00004.safetensors",
      "model-00002-of-00004.safetensors",
      "model-00003-of-00004.safetensors",
      "model-00004-of-00004.safetensors",
    ]);
    assert.equal(index!.metadata.total_size, 5 * 1024 + 2560);
    assert.equal(index!.weight_map["layers.2.weight"], "model-00002-of-00004.safetensors");
    assert.equal(index!.weight_map["lm_head.weight"], "model-00004-of-00004.safetensors");
    const onDisk = JSON.parse(readFileSync(join(dir, st.INDEX_NAME), "utf8"));
    assert.deepEqual(onDisk, index);
    assert.deepEqual(await st.loadFileMetadata(join(dir, files[0]!)), { format: "pt" });
    for (const src of [dir, join(dir, st.INDEX_NAME)]) {
      const back = await st.loadSharded(src);
      assert.deepEqual(Object.keys(back).sort(), Object.keys(tensors).sort());
      for (const [k, v] of Object.entries(tensors)) assert.equal(await back[k]!.sub(v).abs().max().item(), 0, k);
    }
    // a model that fits one shard is a single model.safetensors, which loadSharded also reads
    const one = join(dir, "one");
    const r = await st.saveSharded({ a: torch.ones(3) }, one);
    assert.deepEqual(r, { files: ["model.safetensors"], index: null });
    assert.deepEqual(readdirSync(one), ["model.safetensors"]);
    assert.deepEqual(await (await st.loadSharded(one)).a!.tolist(), [1, 1, 1]);
    // an index naming a tensor its shard lacks
    writeFileSync(join(dir, st.INDEX_NAME), JSON.stringify({ metadata: { total_size: 0 }, weight_map: { ghost: files[0] } }));
    await assert.rejects(st.loadSharded(dir), /shard model-00001-of-00004\.safetensors lacks tensor\(s\) 'ghost'/);
    writeFileSync(join(dir, st.INDEX_NAME), JSON.stringify({ weight_map: { a: "../etc/passwd" } }));
    await assert.rejects(st.loadSharded(dir), /weight_map must map tensor names to shard file names/);
    await assert.rejects(st.loadSharded(join(dir, "one", "..", "missing-dir-xyz")), /ENOENT/);
  }),
);
