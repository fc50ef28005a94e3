// DDP's bucket assignment (PyTorch's compute_bucket_assignment_by_size): tensors are taken in the
// given order, one open bucket per dtype; a bucket closes once its bytes reach the current limit,
// and each closed bucket advances to the next limit (the last one repeats). So with limits
// [1 MB, cap] the first bucket to close is small: the first gradients produced start their
// all-reduce early instead of waiting for a whole cap's worth.
import type { DType } from "../ir/dtype.js";
import { itemSize } from "../ir/dtype.js";

export interface BucketTensor {
  numel: number;
  dtype: DType;
}

/**
 * Bucket the tensors (indices into `tensors`, visited in `order`, default 0..n-1). Returns the
 * buckets and the limit each was filled against. Without an explicit order the buckets are sorted by
 * the smallest index they hold (so they become ready one after the other); with one they keep the
 * order in which they were filled, as PyTorch's rebuild does.
 */
export function computeBucketAssignmentBySize(
  tensors: BucketTensor[],
  limits: number[],
  order?: number[],
): { buckets: number[][]; limits: number[] } {
  if (!limits.length) throw new Error("computeBucketAssignmentBySize: expected at least one size limit");
  const open = new Map<DType, { idx: number[]; bytes: number; limit: number }>();
  const done: { idx: number[]; limit: number }[] = [];
  const visit = order ?? tensors.map((_, i) => i);
  for (const i of visit) {
    const t = tensors[i]!;
    let b = open.get(t.dtype);
    if (!b) open.set(t.dtype, (b = { idx: [], bytes: 0, limit: 0 }));
    b.idx.push(i);
    b.bytes += t.numel * itemSize(t.dtype);
    const limit = limits[Math.min(b.limit, limits.length - 1)]!;
    if (b.bytes >= limit) {
      done.push({ idx: b.idx, limit });
      b.idx = [];
      b.bytes = 0;
      b.limit++;
    }
  }
  for (const b of open.values()) if (b.idx.length) done.push({ idx: b.idx, limit: limits[Math.min(b.limit, limits.length - 1)]! });
  if (!order) done.sort((x, y) => Math.min(...x.idx) - Math.min(...y.idx));
  return { buckets: done.map((b) => b.idx), limits: done.map((b) => b.limit) };
}
