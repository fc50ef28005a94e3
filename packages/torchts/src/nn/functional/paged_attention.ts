// pagedAttention: causal attention for a batch of sequences of different lengths whose earlier keys and
// values live in a paged KV cache (what a serving engine runs each step: some sequences decode one
// token, others prefill a chunk). The layout is flash-attn's varlen + block_table one:
//   query [T, Hq, E]        the new tokens of every sequence, packed: sequence b owns rows
//                           [cuSeqlensQ[b], cuSeqlensQ[b + 1])
//   key, value [T, Hk, E]   the new tokens' keys and values (not yet in the cache)
//   keyCache, valueCache    [numBlocks, blockSize, Hk, E]: cache slot s of block n holds one position
//   blockTable [B, M]       sequence b's position p lives in block blockTable[b][p / blockSize], slot p % blockSize
//   cacheSeqlens [B]        positions of sequence b already in the cache (its new tokens follow them)
// New token l of sequence b sees its cacheSeqlens[b] cached positions and new tokens 0..l. Devices with a
// `pagedAttention` kernel (cpu) read the caches in place through the table; elsewhere the decomposition
// gathers each token's blocks (correct, but it reads O(context) per token: slow). Writing the new keys
// into the cache is the caller's (Tensor.indexCopy_ on the cache viewed as [numBlocks * blockSize, Hk, E]).
import type { Tensor } from "../../tensor.js";
import { op, type Sig } from "../../ops/registry.js";
import { compositePrim } from "../../ops/core.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import { _hostValues, indexSelect } from "../../ops/indexing.js";
import { arange } from "../../ops/creation.js";
import { matmul } from "../../ops/linalg.js";
import { sum } from "../../ops/reduce.js";
import { torchSoftmax as softmax } from "./activation.js";
import { shapeStr } from "../../ir/shape.js";
import { isFloating } from "../../ir/dtype.js";

const NAME = "pagedAttention";
const INT = new Set(["int32", "int64"]);

function check(q: Tensor, k: Tensor, v: Tensor, kc: Tensor, vc: Tensor, table: Tensor, cu: Tensor, lens: Tensor): void {
  const bad = (m: string) => {
    throw new RangeError(m);
  };
  if (!isFloating(q.dtype)) throw new TypeError(`expected query to have a floating point dtype, but got ${q.dtype}`);
  for (const [t, n] of [[k, "key"], [v, "value"], [kc, "keyCache"], [vc, "valueCache"]] as const)
    if (t.dtype !== q.dtype) throw new TypeError(`expected ${n} to have the dtype of query (${q.dtype}), but got ${t.dtype}`);
  for (const [t, n] of [[table, "blockTable"], [cu, "cuSeqlensQ"], [lens, "cacheSeqlens"]] as const)
    if (!INT.has(t.dtype)) throw new TypeError(`expected ${n} to have an integer dtype (int32 or int64), but got ${t.dtype}`);
  if (q.ndim !== 3 || k.ndim !== 3 || v.ndim !== 3)
    bad(`expected query, key and value of 3 dims [tokens, heads, headDim], got ${shapeStr(q.shape)}, ${shapeStr(k.shape)}, ${shapeStr(v.shape)}`);
  if (kc.ndim !== 4 || vc.ndim !== 4)
    bad(`expected keyCache and valueCache of 4 dims [numBlocks, blockSize, heads, headDim], got ${shapeStr(kc.shape)}, ${shapeStr(vc.shape)}`);
  const [T, Hq, E] = q.shape as [number, number, number];
  const [Hk, Ev] = [k.shape[1]!, v.shape[2]!];
  if (k.shape[0] !== T || v.shape[0] !== T || v.shape[1] !== Hk || k.shape[2] !== E)
    bad(`expected key [${T}, Hk, ${E}] and value [${T}, Hk, Ev] for query ${shapeStr(q.shape)}, got ${shapeStr(k.shape)}, ${shapeStr(v.shape)}`);
  if (Hk === 0 || Hq % Hk !== 0) bad(`number of query heads (${Hq}) must be a multiple of the number of key/value heads (${Hk})`);
  const [NB, bs] = [kc.shape[0]!, kc.shape[1]!];
  if (kc.shape[2] !== Hk || kc.shape[3] !== E) bad(`expected keyCache [numBlocks, blockSize, ${Hk}, ${E}], got ${shapeStr(kc.shape)}`);
  if (vc.shape[0] !== NB || vc.shape[1] !== bs || vc.shape[2] !== Hk || vc.shape[3] !== Ev)
    bad(`expected valueCache [${NB}, ${bs}, ${Hk}, ${Ev}] (the keyCache's blocks), got ${shapeStr(vc.shape)}`);
  if (bs < 1) bad(`the caches' block size must be positive, got ${shapeStr(kc.shape)}`);
  if (table.ndim !== 2 || cu.ndim !== 1 || lens.ndim !== 1 || cu.shape[0] !== table.shape[0]! + 1 || lens.shape[0] !== table.shape[0])
    bad(`expected blockTable [B, maxBlocks], cuSeqlensQ [B + 1] and cacheSeqlens [B], got ${shapeStr(table.shape)}, ${shapeStr(cu.shape)}, ${shapeStr(lens.shape)}`);
  const dev = q.device;
  for (const t of [k, v, kc, vc, table, cu, lens])
    if (t.device !== dev) throw new Error(`Expected all tensors to be on the same device, but found at least two devices, ${dev} and ${t.device}!`);
}

/**
 * The table's values, where the device reads them cheaply (cpu): a block id outside the cache, a cached
 * length past the table or a decreasing cuSeqlensQ would make the kernel read another sequence's keys.
 * (The kernel checks them again when it runs: a value may change between the call and a fused flush.)
 */
function checkValues(q: Tensor, kc: Tensor, table: Tensor, cu: Tensor, lens: Tensor): void {
  const [tv, cv, lv] = [_hostValues(table), _hostValues(cu), _hostValues(lens)];
  if (!tv || !cv || !lv) return;
  const [T, NB, bs] = [q.shape[0]!, kc.shape[0]!, kc.shape[1]!];
  const [B, MB] = table.shape as [number, number];
  for (let b = 0; b < B; b++) {
    if (!(cv[b]! >= 0 && cv[b + 1]! >= cv[b]! && cv[b + 1]! <= T) || (b === 0 && cv[0] !== 0))
      throw new RangeError(`cuSeqlensQ must start at 0 and be non-decreasing in [0, ${T}], got ${cv[b]}, ${cv[b + 1]} at sequence ${b}`);
    const n = lv[b]!;
    if (!(n >= 0 && n <= MB * bs)) throw new RangeError(`cacheSeqlens[${b}] = ${n} is outside [0, ${MB * bs}] (the block table holds ${MB} blocks of ${bs})`);
    for (let j = 0; j < Math.ceil(n / bs); j++) {
      const id = tv[b * MB + j]!;
      if (!(id >= 0 && id < NB)) throw new RangeError(`blockTable[${b}][${j}] = ${id} is not a block of the cache (${NB} blocks)`);
    }
  }
}

function pagedImpl(q: Tensor, k: Tensor, v: Tensor, kc: Tensor, vc: Tensor, table: Tensor, cu: Tensor, lens: Tensor, scale: number | null): Tensor {
  check(q, k, v, kc, vc, table, cu, lens);
  checkValues(q, kc, table, cu, lens);
  const [T, Hq, E] = q.shape as [number, number, number];
  const Ev = v.shape[2]!;
  const sc = scale ?? 1 / Math.sqrt(E);
  const ints = [table, cu, lens].map((t) => (t.dtype === "int32" ? t : t.to("int32")));
  if (q.dtype === "float32" && !(q.requiresGrad || k.requiresGrad || v.requiresGrad)) {
    const out = compositePrim(NAME, { scale: sc }, [q, k, v, kc, vc, ...ints], [T, Hq, Ev], "float32");
    if (out) return out;
  }
  return decomposed(q, k, v, kc, vc, table, cu, lens, sc);
}

/**
 * The same attention from ordinary ops, with no host reads: each token gathers every slot its block
 * table row names ([T, M * blockSize] keys, hidden past its cached length) and attends to the new keys
 * of its own sequence up to itself. Values outside the cached length are never weighted (masked to -inf).
 */
function decomposed(q: Tensor, k: Tensor, v: Tensor, kc: Tensor, vc: Tensor, table: Tensor, cu: Tensor, lens: Tensor, sc: number): Tensor {
  const [T, Hq, E] = q.shape as [number, number, number];
  const [Hk, Ev] = [k.shape[1]!, v.shape[2]!];
  const [NB, bs] = [kc.shape[0]!, kc.shape[1]!];
  const [B, MB] = table.shape as [number, number];
  const nrep = Hq / Hk;
  const dev = q.device;
  const i64 = { dtype: "int64" as const, device: dev };
  const tok = arange(T, i64); // [T]
  const cu64 = cu.to("int64");
  // sequence of each token: how many sequence ends lie at or before it
  const seq = sum(M.ge(S.unsqueeze(tok, 1), S.unsqueeze(S.narrow(cu64, 0, 1, B), 0)), 1); // [T]
  const seqC = M.clamp(seq, 0, Math.max(0, B - 1));
  const cached = indexSelect(lens.to("int64"), 0, seqC); // [T]
  // cached keys: slot ids [T, MB * bs]; block ids out of range only where hidden (clamped for the gather)
  const J = MB * bs;
  const blocks = M.clamp(indexSelect(table.to("int64"), 0, seqC), 0, NB - 1); // [T, MB]
  const slots = M.add(M.mul(S.repeatInterleave(blocks, bs, 1), bs), S.unsqueeze(M.remainder(arange(J, i64), bs), 0)); // [T, J]
  const flat = S.reshape(slots, [T * J]);
  const K1 = S.reshape(indexSelect(S.reshape(kc, [NB * bs, Hk, E]), 0, flat), [T, J, Hk, E]);
  const V1 = S.reshape(indexSelect(S.reshape(vc, [NB * bs, Hk, Ev]), 0, flat), [T, J, Hk, Ev]);
  const seen1 = M.lt(S.unsqueeze(arange(J, i64), 0), S.unsqueeze(cached, 1)); // [T, J]
  const seen2 = M.logicalAnd(M.eq(S.unsqueeze(seq, 1), S.unsqueeze(seq, 0)), M.le(S.unsqueeze(tok, 0), S.unsqueeze(tok, 1))); // [T, T]
  const qg = S.reshape(M.mul(q, sc), [T, Hk, nrep, E]);
  const s1 = matmul(qg, S.permute(K1, [0, 2, 3, 1])); // [T, Hk, nrep, J]
  const s2 = S.permute(S.reshape(matmul(S.reshape(S.permute(qg, [1, 0, 2, 3]), [Hk, T * nrep, E]), S.permute(k, [1, 2, 0])), [Hk, T, nrep, T]), [1, 0, 2, 3]); // [T, Hk, nrep, T]
  const m1 = S.reshape(seen1, [T, 1, 1, J]);
  const m2 = S.reshape(seen2, [T, 1, 1, T]);
  const s = S.cat([M.where(m1, s1, -Infinity), M.where(m2, s2, -Infinity)], -1);
  const p = softmax(s, -1);
  const o1 = matmul(S.narrow(p, -1, 0, J), S.permute(V1, [0, 2, 1, 3])); // [T, Hk, nrep, Ev]
  const p2 = S.reshape(S.permute(S.narrow(p, -1, J, T), [1, 0, 2, 3]), [Hk, T * nrep, T]);
  const o2 = S.permute(S.reshape(matmul(p2, S.permute(v, [1, 0, 2])), [Hk, T, nrep, Ev]), [1, 0, 2, 3]);
  return S.reshape(M.add(o1, o2), [T, Hq, Ev]);
}

/**
 * pagedAttention(query, key, value, keyCache, valueCache, blockTable, cuSeqlensQ, cacheSeqlens, *, scale=None):
 * varlen causal attention over a paged KV cache (see the header). torchts's own op, after flash-attn's
 * `flash_attn_varlen_func(..., block_table=)` and vLLM's paged attention; not in torch.nn.functional.
 */
export const pagedAttention = op<
  Sig<
    [query: Tensor, key: Tensor, value: Tensor, keyCache: Tensor, valueCache: Tensor, blockTable: Tensor, cuSeqlensQ: Tensor, cacheSeqlens: Tensor],
    { scale?: number | null },
    Tensor
  >
>(
  "pagedAttention(Tensor query, Tensor key, Tensor value, Tensor keyCache, Tensor valueCache, Tensor blockTable, Tensor cuSeqlensQ, Tensor cacheSeqlens, *, float? scale=None) -> Tensor",
  pagedImpl,
);
