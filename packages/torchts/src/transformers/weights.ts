// Lazy checkpoint reader: model.safetensors or a sharded model.safetensors.index.json. Only the
// headers are read up front; each tensor's bytes are read from disk when it is loaded and go
// straight to the target device in the stored dtype (or a requested one).
import type { DType } from "../ir/dtype.js";
import { bf16BitsToF32, f16BitsToF32 } from "../ir/dtype.js";
import { fromHostData } from "../ops/core.js";
import type { Tensor } from "../tensor.js";
import * as S from "../ops/shape_ops.js";

const TO_DTYPE: Record<string, DType> = {
  F32: "float32", F64: "float64", F16: "float16", BF16: "bfloat16", I64: "int64", I32: "int32", I8: "int8", U8: "uint8", BOOL: "bool",
};

export interface TensorInfo {
  dtype: DType;
  shape: number[];
  file: string;
  /** absolute byte range in the file */
  begin: number;
  end: number;
}

function decode(raw: Uint8Array, dtype: DType, n: number): ArrayLike<number> {
  const buf = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength);
  switch (dtype) {
    case "float32":
      return new Float32Array(buf, 0, n);
    case "float64":
      return new Float64Array(buf, 0, n);
    case "float16":
    case "bfloat16": {
      const bits = new Uint16Array(buf, 0, n);
      const out = new Float32Array(n);
      const f = dtype === "float16" ? f16BitsToF32 : bf16BitsToF32;
      for (let i = 0; i < n; i++) out[i] = f(bits[i]!);
      return out;
    }
    case "int64": {
      const big = new BigInt64Array(buf, 0, n);
      const out = new Float64Array(n);
      for (let i = 0; i < n; i++) out[i] = Number(big[i]!);
      return out;
    }
    case "int32":
      return new Int32Array(buf, 0, n);
    case "int8":
      return new Int8Array(buf, 0, n);
    case "uint8":
    case "bool":
      return new Uint8Array(buf, 0, n);
  }
}

/** What loadCheckpoint reads: named tensors with known shapes, loaded one at a time. */
export interface WeightSource {
  /** names the source in error messages */
  readonly dir: string;
  keys(): string[];
  shapeOf(key: string): number[];
  load(key: string, opts?: { device?: string; dtype?: DType }): Promise<Tensor>;
}

export class Checkpoint implements WeightSource {
  private constructor(
    readonly dir: string,
    readonly tensors: Map<string, TensorInfo>,
  ) {}

  static async open(dir: string): Promise<Checkpoint> {
    const fs = await import("node:fs/promises");
    const path = await import("node:path");
    const indexFile = path.join(dir, "model.safetensors.index.json");
    let files: string[];
    let weightMap: Record<string, string> | null = null;
    try {
      const idx = JSON.parse(await fs.readFile(indexFile, "utf8")) as { weight_map?: Record<string, string> };
      if (!idx.weight_map) throw new Error(`${indexFile}: no "weight_map"`);
      weightMap = idx.weight_map;
      files = [...new Set(Object.values(weightMap))];
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
      files = ["model.safetensors"];
    }
    const tensors = new Map<string, TensorInfo>();
    for (const f of files) {
      const file = path.join(dir, f);
      let fh;
      try {
        fh = await fs.open(file, "r");
      } catch (e) {
        throw new Error(`fromPretrained: cannot open weights file ${file}: ${(e as Error).message}`, { cause: e });
      }
      try {
        const lenBuf = new Uint8Array(8);
        await fh.read(lenBuf, 0, 8, 0);
        const n = Number(new DataView(lenBuf.buffer).getBigUint64(0, true));
        const hb = new Uint8Array(n);
        await fh.read(hb, 0, n, 8);
        const header = JSON.parse(new TextDecoder().decode(hb)) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
        for (const [name, e] of Object.entries(header)) {
          if (name === "__metadata__") continue;
          const dtype = TO_DTYPE[e.dtype];
          if (!dtype) throw new Error(`safetensors: ${file}: tensor '${name}': unsupported dtype ${e.dtype}`);
          if (weightMap && weightMap[name] !== undefined && weightMap[name] !== f)
            throw new Error(`${indexFile}: weight_map puts '${name}' in ${weightMap[name]} but it is in ${f}`);
          tensors.set(name, { dtype, shape: e.shape, file, begin: 8 + n + e.data_offsets[0], end: 8 + n + e.data_offsets[1] });
        }
      } finally {
        await fh.close();
      }
    }
    if (weightMap) for (const k of Object.keys(weightMap)) if (!tensors.has(k)) throw new Error(`${indexFile}: '${k}' is listed in weight_map but not found in ${weightMap[k]}`);
    return new Checkpoint(dir, tensors);
  }

  keys(): string[] {
    return [...this.tensors.keys()];
  }
  shapeOf(key: string): number[] {
    return this.tensors.get(key)!.shape;
  }

  /** Read one tensor from disk onto `device`, cast to `dtype` when given (floating tensors only). */
  async load(key: string, opts: { device?: string; dtype?: DType } = {}): Promise<Tensor> {
    const info = this.tensors.get(key);
    if (!info) throw new Error(`checkpoint ${this.dir}: no tensor named '${key}'`);
    const fs = await import("node:fs/promises");
    const fh = await fs.open(info.file, "r");
    const bytes = new Uint8Array(info.end - info.begin);
    try {
      await fh.read(bytes, 0, bytes.length, info.begin);
    } finally {
      await fh.close();
    }
    const n = info.shape.reduce((a, b) => a * b, 1);
    let t = fromHostData(decode(bytes, info.dtype, n), info.shape, info.dtype, opts.device ?? "cpu");
    const isFloat = info.dtype.startsWith("float") || info.dtype === "bfloat16";
    if (opts.dtype && isFloat && opts.dtype !== info.dtype) t = S.to(t, opts.dtype);
    return t;
  }
}
