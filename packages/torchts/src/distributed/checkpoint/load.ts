// distributed.checkpoint.load: in place, like PyTorch's: every tensor (or DTensor) of `stateDict`
// is filled from the checkpoint whatever the number of ranks that saved it: each rank reads the
// saved chunks that overlap its piece (a plain tensor's piece is the whole tensor) and copies the
// overlaps; plain values are written back into their containers. No communication.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { noGrad } from "../../autograd/grad_mode.js";
import { SafetensorsFile } from "../../io/safetensors.js";
import { Tensor } from "../../tensor.js";
import { DistError } from "../errors.js";
import { isDTensor } from "../tensor/dtensor.js";
import { decodeValue, flattenStateDict } from "./flatten.js";
import { DCP_FORMAT, METADATA_NAME, type Metadata } from "./metadata.js";

export interface LoadOptions {
  checkpointId: string;
  processGroup?: unknown;
  noDist?: boolean;
}

/** The checkpoint's metadata (what a completed save committed). */
export async function readMetadata(checkpointId: string): Promise<Metadata> {
  let text: string;
  try {
    text = await readFile(join(checkpointId, METADATA_NAME), "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT")
      throw new DistError(`load: no checkpoint at ${checkpointId} (no ${METADATA_NAME}: the folder is missing or no save to it completed)`);
    throw e;
  }
  const meta = JSON.parse(text) as Metadata;
  if (meta.format !== DCP_FORMAT) throw new DistError(`load: ${checkpointId} is not a torchts distributed checkpoint (format ${String(meta.format)})`);
  return meta;
}

export async function load(stateDict: unknown, opts: LoadOptions): Promise<void> {
  if (!opts || typeof opts.checkpointId !== "string") throw new TypeError("load(): checkpointId (the checkpoint's folder) is required");
  const dir = opts.checkpointId;
  const meta = await readMetadata(dir);
  const files = new Map<string, Promise<SafetensorsFile>>();
  const open = (f: string) => {
    let p = files.get(f);
    if (!p) files.set(f, (p = SafetensorsFile.open(join(dir, f))));
    return p;
  };
  try {
    for (const leaf of flattenStateDict(stateDict, "load")) {
      const v = leaf.value;
      if (!(v instanceof Tensor)) {
        if (!(leaf.fqn in meta.values)) throw new DistError(`load: Missing key in checkpoint state_dict: ${leaf.fqn}.`);
        leaf.set(decodeValue(meta.values[leaf.fqn]));
        continue;
      }
      const saved = meta.tensors[leaf.fqn];
      if (!saved) throw new DistError(`load: Missing key in checkpoint state_dict: ${leaf.fqn}.`);
      if (saved.shape.join() !== v.shape.join())
        throw new DistError(`load: size mismatch for ${leaf.fqn}: the checkpoint has shape [${saved.shape.join(", ")}], the state dict [${v.shape.join(", ")}]`);
      const dst = isDTensor(v) ? v._local : v;
      const offsets = isDTensor(v) ? v.localOffsets() : v.shape.map(() => 0);
      let covered = 0;
      for (const c of saved.chunks) {
        // the overlap of the saved chunk and this rank's piece, per dim
        const lo = offsets.map((o, d) => Math.max(o, c.offsets[d]!));
        const hi = offsets.map((o, d) => Math.min(o + dst.shape[d]!, c.offsets[d]! + c.sizes[d]!));
        if (lo.some((l, d) => l >= hi[d]!) && dst.numel() > 0) continue;
        if (dst.numel() === 0) break;
        const src = await (await open(c.file)).getTensor(c.key);
        let a: Tensor = dst;
        let b: Tensor = src;
        lo.forEach((l, d) => {
          a = a.narrow(d, l - offsets[d]!, hi[d]! - l);
          b = b.narrow(d, l - c.offsets[d]!, hi[d]! - l);
        });
        noGrad(() => a.copy_(b));
        covered += a.numel();
      }
      if (covered !== dst.numel()) throw new DistError(`load: the checkpoint does not cover ${leaf.fqn} (${covered} of ${dst.numel()} elements of this rank's piece)`);
    }
  } finally {
    for (const p of files.values()) await p.then((f) => f.close()).catch(() => {});
  }
}
