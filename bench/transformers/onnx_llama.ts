// torchts LlamaForCausalLM (f32) -> ONNX decoder-with-past, laid out the way transformers.js 4.x
// loads a Llama text-generation model: <dir>/config.json, <dir>/generation_config.json,
// <dir>/onnx/model.onnx (weights inline; external data is only needed past 2 GB).
//
// Graph inputs / outputs are the names transformers.js feeds and reads (modeling_utils.js
// decoder_forward / getPastKeyValues / addPastKeyValues):
//   input_ids, attention_mask, position_ids [int64], past_key_values.{i}.key/value
//   [batch_size, kv_heads, past_sequence_length, head_dim], num_logits_to_keep [int64 scalar;
//   0 = all positions, generate() passes 1] -> logits, present.{i}.key/value.
// The cache inputs have numeric head dims: transformers.js sizes its empty first-step cache
// from the input metadata (symbolic dims other than batch_size become 0).
//
// Standard opset-17 ops only. RMSNorm is written as Pow/ReduceMean/Add/Sqrt/Div/Mul, the
// pattern onnxruntime fuses into SimplifiedLayerNormalization at load; GQA reads each KV head
// once by grouping the query heads of a KV head as rows ([B, nkv, nrep*L, hd]) instead of
// repeating K/V; the causal + padding mask is built once per call and shared by the layers.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LlamaForCausalLM, PreTrainedModel } from "../../packages/torchts/src/transformers/index.js";
import type { Tensor } from "../../packages/torchts/src/index.js";
import { Graph } from "./onnx_graph.js";

const F32_MIN = -3.4028234663852886e38;

async function f32(t: Tensor): Promise<Float32Array> {
  if (t.dtype !== "float32") throw new Error(`exportLlamaOnnx: ${t.dtype} weights are not supported (float32 only)`);
  return (await t.contiguous().data()) as Float32Array;
}

/** [out, in] Linear weight as the [in, out] MatMul operand. */
async function matmulWeight(t: Tensor): Promise<Float32Array> {
  return f32(t.t());
}

export interface ExportOptions {
  /** RoPE table rows (default config.max_position_embeddings) */
  maxPositions?: number;
}

/** Builds the graph; returns the number of bytes written. */
export async function exportLlamaOnnx(model: LlamaForCausalLM | PreTrainedModel, file: string, opts: ExportOptions = {}): Promise<number> {
  const c = model.config;
  if (!["llama", "mistral"].includes(c.modelType) || (model.constructor as { name: string }).name !== "LlamaForCausalLM")
    throw new Error(`exportLlamaOnnx: only LlamaForCausalLM is supported, got ${c.modelType}`);
  if (c.slidingWindow !== null) throw new Error("exportLlamaOnnx: sliding-window attention is not supported");
  const nh = c.numAttentionHeads;
  const nkv = c.numKeyValueHeads;
  const hd = c.headDim;
  const C = c.hiddenSize;
  const nrep = nh / nkv;
  const P = new Map<string, Tensor>([...model.namedParameters()]);
  const param = (name: string): Tensor => {
    const t = P.get(name);
    if (!t) throw new Error(`exportLlamaOnnx: missing parameter ${name}`);
    return t;
  };
  const g = new Graph();

  const inputIds = g.input("input_ids", "int64", ["batch_size", "sequence_length"]);
  const attnMask = g.input("attention_mask", "int64", ["batch_size", "total_sequence_length"]);
  const posIds = g.input("position_ids", "int64", ["batch_size", "sequence_length"]);
  const past: [string, string][] = [];
  for (let i = 0; i < c.numHiddenLayers; i++)
    past.push([
      g.input(`past_key_values.${i}.key`, "float", ["batch_size", nkv, "past_sequence_length", hd]),
      g.input(`past_key_values.${i}.value`, "float", ["batch_size", nkv, "past_sequence_length", hd]),
    ]);
  const keep = g.input("num_logits_to_keep", "int64", []);

  // RoPE tables [maxPos, hd] = cos/sin(cat(freqs, freqs)), freqs = f32(pos * inv_freq) like torchts
  const maxPos = opts.maxPositions ?? c.maxPositionEmbeddings;
  const inv = await f32((model as LlamaForCausalLM).invFreq);
  const cosT = new Float32Array(maxPos * hd);
  const sinT = new Float32Array(maxPos * hd);
  for (let p = 0; p < maxPos; p++)
    for (let j = 0; j < hd / 2; j++) {
      const f = Math.fround(Math.fround(p) * inv[j]!);
      cosT[p * hd + j] = cosT[p * hd + j + hd / 2] = Math.cos(f);
      sinT[p * hd + j] = sinT[p * hd + j + hd / 2] = Math.sin(f);
    }
  const ax = (axes: number[]) => g.i64(axes);
  const cos = g.op("Unsqueeze", [g.op("Gather", [g.init("rope_cos", "float", [maxPos, hd], cosT), posIds], { axis: 0 }), ax([1])]); // [B,1,L,hd]
  const sin = g.op("Unsqueeze", [g.op("Gather", [g.init("rope_sin", "float", [maxPos, hd], sinT), posIds], { axis: 0 }), ax([1])]);

  // additive mask [B, 1, nrep*L, T]: key j is visible from query i (at key index T-L+i) when
  // j <= T-L+i and attention_mask[b, j] = 1; the rows repeat per query head of a group
  const L = g.op("Shape", [inputIds], { start: 1, end: 2 });
  const T = g.op("Shape", [attnMask], { start: 1, end: 2 });
  const Ts = g.op("Squeeze", [T, ax([0])]);
  const Ps = g.op("Squeeze", [g.op("Sub", [T, L]), ax([0])]);
  const zero = g.i64([0], []);
  const one = g.i64([1], []);
  const kIdx = g.op("Unsqueeze", [g.op("Range", [zero, Ts, one]), ax([0])]); // [1, T]
  const qIdx = g.op("Unsqueeze", [g.op("Range", [Ps, Ts, one]), ax([1])]); // [L, 1]
  const causal = g.op("LessOrEqual", [kIdx, qIdx]); // [L, T]
  const pad = g.op("Unsqueeze", [g.op("Cast", [attnMask], { to: 9 }), ax([1, 2])]); // [B,1,1,T]
  const allowed = g.op("And", [causal, pad]); // [B,1,L,T]
  let bias = g.op("Where", [allowed, g.f32(0), g.f32(F32_MIN)]);
  if (nrep > 1) bias = g.op("Tile", [bias, g.i64([1, 1, nrep, 1])]);

  const linear = async (x: string, prefix: string): Promise<string> => {
    const w = param(`${prefix}.weight`);
    let y = g.op("MatMul", [x, g.init(`${prefix}.weight`, "float", [w.shape[1]!, w.shape[0]!], await matmulWeight(w))]);
    const b = P.get(`${prefix}.bias`);
    if (b) y = g.op("Add", [y, g.init(`${prefix}.bias`, "float", [b.shape[0]!], await f32(b))]);
    return y;
  };
  const rmsNorm = async (x: string, name: string): Promise<string> => {
    const w = param(name);
    const v = g.op("ReduceMean", [g.op("Pow", [x, g.f32(2)])], { axes: [2], keepdims: 1 });
    const n = g.op("Div", [x, g.op("Sqrt", [g.op("Add", [v, g.f32(c.normEps)])])]);
    return g.op("Mul", [n, g.init(name, "float", [w.shape[0]!], await f32(w))]);
  };
  const rope = (x: string): string => {
    const [x1, x2] = g.node("Split", [x, g.i64([hd / 2, hd / 2])], { axis: 3 }, 2) as [string, string];
    const rot = g.op("Concat", [g.op("Neg", [x2]), x1], { axis: 3 });
    return g.op("Add", [g.op("Mul", [x, cos]), g.op("Mul", [rot, sin])]);
  };
  const heads = (x: string, n: number) => g.op("Transpose", [g.op("Reshape", [x, g.i64([0, 0, n, hd])])], { perm: [0, 2, 1, 3] });

  let h = g.op("Gather", [g.init("model.embed_tokens.weight", "float", param("model.embed_tokens.weight").shape as number[], await f32(param("model.embed_tokens.weight"))), inputIds], { axis: 0 });
  const scale = g.f32(hd ** -0.5);
  for (let i = 0; i < c.numHiddenLayers; i++) {
    const pre = `model.layers.${i}`;
    const x = await rmsNorm(h, `${pre}.input_layernorm.weight`);
    const q = rope(heads(await linear(x, `${pre}.self_attn.q_proj`), nh)); // [B,nh,L,hd]
    const k = rope(heads(await linear(x, `${pre}.self_attn.k_proj`), nkv)); // [B,nkv,L,hd]
    const v = heads(await linear(x, `${pre}.self_attn.v_proj`), nkv);
    const K = g.op("Concat", [past[i]![0], k], { axis: 2 }, `present.${i}.key`); // [B,nkv,T,hd]
    const V = g.op("Concat", [past[i]![1], v], { axis: 2 }, `present.${i}.value`);
    const qg = g.op("Reshape", [g.op("Mul", [q, scale]), g.i64([0, nkv, -1, hd])]); // [B,nkv,nrep*L,hd]
    const s = g.op("Add", [g.op("MatMul", [qg, g.op("Transpose", [K], { perm: [0, 1, 3, 2] })]), bias]);
    const o = g.op("MatMul", [g.op("Softmax", [s], { axis: 3 }), V]); // [B,nkv,nrep*L,hd]
    const merged = g.op("Reshape", [g.op("Transpose", [g.op("Reshape", [o, g.i64([0, nh, -1, hd])])], { perm: [0, 2, 1, 3] }), g.i64([0, 0, nh * hd])]);
    h = g.op("Add", [h, await linear(merged, `${pre}.self_attn.o_proj`)]);
    const x2 = await rmsNorm(h, `${pre}.post_attention_layernorm.weight`);
    const gate = await linear(x2, `${pre}.mlp.gate_proj`);
    const act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), await linear(x2, `${pre}.mlp.up_proj`)]);
    h = g.op("Add", [h, await linear(act, `${pre}.mlp.down_proj`)]);
  }
  // last num_logits_to_keep positions (0 = all: -0 is start 0)
  const start = g.op("Neg", [g.op("Unsqueeze", [keep, ax([0])])]);
  h = g.op("Slice", [h, start, g.i64([2 ** 62]), ax([1])]);
  h = await rmsNorm(h, "model.norm.weight");
  const lm = (model as LlamaForCausalLM).lm_head.weight as unknown as Tensor;
  g.op("MatMul", [h, g.init("lm_head.weight", "float", [C, c.vocabSize], await matmulWeight(lm))], {}, "logits");

  g.output("logits", "float", ["batch_size", "logits_length", c.vocabSize]);
  for (let i = 0; i < c.numHiddenLayers; i++) {
    g.output(`present.${i}.key`, "float", ["batch_size", nkv, "total_sequence_length", hd]);
    g.output(`present.${i}.value`, "float", ["batch_size", nkv, "total_sequence_length", hd]);
  }
  return g.save(file);
}

/**
 * A directory transformers.js `AutoModelForCausalLM.from_pretrained(dir, { dtype: "fp32" })`
 * loads. The config has no eos/bos ids: generation never stops early (like torchts's
 * `stopTokenIds: []`), which the benchmark needs with random weights.
 */
export async function saveForTransformersJs(model: LlamaForCausalLM | PreTrainedModel, dir: string, opts: ExportOptions = {}): Promise<number> {
  const c = model.config;
  mkdirSync(join(dir, "onnx"), { recursive: true });
  const config = {
    model_type: "llama", architectures: ["LlamaForCausalLM"], vocab_size: c.vocabSize, hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize, num_hidden_layers: c.numHiddenLayers, num_attention_heads: c.numAttentionHeads,
    num_key_value_heads: c.numKeyValueHeads, head_dim: c.headDim, max_position_embeddings: opts.maxPositions ?? c.maxPositionEmbeddings,
    rms_norm_eps: c.normEps, rope_theta: c.rope?.ropeTheta, tie_word_embeddings: c.tieWordEmbeddings, hidden_act: "silu",
    torch_dtype: "float32", use_cache: true,
  };
  writeFileSync(join(dir, "config.json"), JSON.stringify(config, null, 1));
  writeFileSync(join(dir, "generation_config.json"), JSON.stringify({ do_sample: false }, null, 1));
  return exportLlamaOnnx(model, join(dir, "onnx", "model.onnx"), opts);
}
