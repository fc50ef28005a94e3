// Malformed safetensors input must always end in a clear `safetensors: <source>: ...` Error,
// never a crash, a hang or a stray RangeError from typed arrays: thousands of mutated files.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/index.js";

const st = torch.safetensors;

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function base(): Uint8Array {
  return st.save(
    {
      w: torch.arange(12, { dtype: "float32" }).reshape(3, 4),
      h: torch.tensor([1.5, -2], { dtype: "float16" }),
      i: torch.tensor([7, -8, 9], { dtype: "int64" }),
      b: torch.tensor([true, false], { dtype: "bool" }),
    },
    { format: "pt" },
  );
}

function header(bytes: Uint8Array): { n: number; h: Record<string, any> } {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  return { n, h: JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) };
}

function rebuild(h: unknown, data: Uint8Array, lenDelta = 0): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(h));
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(Math.max(0, json.length + lenDelta)), true);
  out.set(json, 8);
  out.set(data, 8 + json.length);
  return out;
}

const WILD = [-1, 0, 1, 3, 4, 7, 8, 1e9, 2 ** 53, 2 ** 60, 1.5, "8", null, [], {}, NaN];
const DTYPES = ["F32", "F16", "BF16", "I64", "U8", "BOOL", "F8_E4M3", "U64", "C64", "f32", "", 7];

function mutate(src: Uint8Array, r: () => number): Uint8Array {
  const pick = <T>(a: T[]): T => a[Math.floor(r() * a.length)]!;
  const { n, h } = header(src);
  const data = src.subarray(8 + n);
  const names = Object.keys(h).filter((k) => k !== "__metadata__");
  const name = pick(names);
  switch (Math.floor(r() * 10)) {
    case 0: // truncate anywhere
      return src.subarray(0, Math.floor(r() * src.length));
    case 1: // flip random bytes (header length, JSON or data)
    {
      const out = src.slice();
      for (let k = 0, m = 1 + Math.floor(r() * 4); k < m; k++) out[Math.floor(r() * out.length)] = Math.floor(r() * 256);
      return out;
    }
    case 2: // header length off by a little or a lot
    {
      const out = src.slice();
      const v = pick([0n, 1n, 7n, BigInt(n - 1), BigInt(n + 1), BigInt(src.length), 2n ** 63n, 2n ** 64n - 1n, 100_000_001n]);
      new DataView(out.buffer).setBigUint64(0, v, true);
      return out;
    }
    case 3:
      h[name].data_offsets = [pick(WILD), pick(WILD)];
      return rebuild(h, data);
    case 4: // shift one tensor onto its neighbour (overlap) or past the end
      h[name].data_offsets = h[name].data_offsets.map((o: number) => o + pick([-8, -4, -2, 2, 4, 8, data.length]));
      return rebuild(h, data);
    case 5:
      h[name].dtype = pick(DTYPES);
      return rebuild(h, data);
    case 6:
      h[name].shape = pick([[-1], [2 ** 53], [1e20], [3, 5], [], [0], ["3"], null, [1.5], [2 ** 26, 2 ** 26]]);
      return rebuild(h, data);
    case 7:
      h[name] = pick([null, 3, "x", [], { dtype: "F32" }]);
      return rebuild(h, data);
    case 8:
      h.__metadata__ = pick([null, 3, [], { a: 1 }, { a: "ok" }]);
      return rebuild(h, data, pick([0, 0, -1, 1]));
    default: // drop or add data bytes
      return rebuild(h, r() < 0.5 ? data.subarray(0, Math.max(0, data.length - 1 - Math.floor(r() * 8))) : new Uint8Array([...data, 0, 0, 0, 0]));
  }
}

function check(what: string, f: () => unknown): "ok" | "rejected" {
  try {
    f();
    return "ok";
  } catch (e) {
    assert.ok(e instanceof Error, `${what}: threw a non-Error ${String(e)}`);
    assert.equal(e.constructor, Error, `${what}: threw ${e.constructor.name}: ${e.message}`);
    assert.match(e.message, /^safetensors: fuzz\.safetensors: \S/, `${what}: unclear message: ${e.message}`);
    return "rejected";
  }
}

test("fuzz: 3000 mutated buffers are loaded or rejected with a clear error", () => {
  const r = rng(1234);
  const src = base();
  let rejected = 0;
  for (let i = 0; i < 3000; i++) {
    const bytes = mutate(src, r);
    const res = check(`case ${i}`, () => {
      const out = st.load(bytes, "fuzz.safetensors");
      // whatever loads must be self-consistent
      for (const t of Object.values(out)) assert.equal(t.numel(), t.shape.reduce((p, q) => p * q, 1));
      st.loadMetadata(bytes, "fuzz.safetensors");
    });
    if (res === "rejected") rejected++;
  }
  assert.ok(rejected > 2500, `only ${rejected} of 3000 mutations rejected`);
});

test("fuzz: mutated files through the lazy file reader", async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-fuzz-"));
  try {
    const r = rng(99);
    const src = base();
    const path = join(dir, "fuzz.safetensors");
    for (let i = 0; i < 300; i++) {
      writeFileSync(path, mutate(src, r));
      try {
        const f = await st.safeOpen(path);
        try {
          for (const k of f.keys()) await f.getTensor(k);
        } finally {
          await f.close();
        }
      } catch (e) {
        assert.equal((e as Error).constructor, Error, `file case ${i}: ${(e as Error).message}`);
        assert.ok((e as Error).message.startsWith(`safetensors: ${path}: `), `file case ${i}: ${(e as Error).message}`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
