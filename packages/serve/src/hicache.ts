// A HiCache-style host tier (SGLang's hierarchical cache) under the radix prefix cache: blocks the
// device pool evicts are kept in host memory (and, with a directory, on disk) under a hash of their
// whole token prefix, and a later request whose prompt continues a cached prefix loads them back into
// free pool blocks instead of recomputing them.
//
// Keys chain as vLLM's block hashes do: key(i) = sha256(key(i - 1), tokens of block i), key(-1) =
// sha256(salt), so a block is found only under the same salt and the same preceding tokens.
// Memory is bounded by `capacityBytes` (least recently used blocks go first, to disk when there is a
// directory); disk files are written atomically (a temp file, then rename), so a killed process
// leaves only whole blocks behind.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync, existsSync, unlinkSync } from "node:fs";
import { join } from "node:path";

export interface HostTierOptions {
  /** Host memory for saved blocks, in bytes. */
  capacityBytes: number;
  /** Optional directory: blocks pushed out of memory are written there and read back on a hit. */
  dir?: string;
}

export interface HostTierStats {
  /** Blocks saved from the device pool. */
  savedBlocks: number;
  /** Blocks loaded back into the pool (each one a block not recomputed). */
  loadedBlocks: number;
  /** Blocks dropped from memory for room (written to disk first when there is a directory). */
  droppedBlocks: number;
  /** Bytes held in memory now. */
  bytes: number;
}

/** The bytes of one block of every layer (keys and values), as the engine reads them from its cache. */
export type BlockData = Float32Array;

export class HostKVTier {
  private readonly mem = new Map<string, BlockData>(); // insertion order = LRU order
  private readonly onDisk = new Set<string>();
  private readonly capacity: number;
  private readonly dir: string | null;
  private bytes = 0;
  private readonly counts = { savedBlocks: 0, loadedBlocks: 0, droppedBlocks: 0 };

  constructor(o: HostTierOptions) {
    if (!(Number.isSafeInteger(o.capacityBytes) && o.capacityBytes > 0))
      throw new RangeError(`HostKVTier: capacityBytes must be a positive integer, got ${String(o.capacityBytes)}`);
    this.capacity = o.capacityBytes;
    this.dir = o.dir ?? null;
    if (this.dir) mkdirSync(this.dir, { recursive: true });
  }

  get stats(): HostTierStats {
    return { ...this.counts, bytes: this.bytes };
  }

  /** The chained keys of the first floor(tokens.length / blockSize) blocks of `tokens` under `salt`. */
  static keys(salt: string, tokens: readonly number[], blockSize: number, upTo = Math.floor(tokens.length / blockSize)): string[] {
    const out: string[] = [];
    let prev = createHash("sha256").update(`salt:${salt}`).digest("hex");
    for (let i = 0; i < upTo; i++) {
      const h = createHash("sha256").update(prev);
      h.update(Int32Array.from(tokens.slice(i * blockSize, (i + 1) * blockSize)));
      prev = h.digest("hex");
      out.push(prev);
    }
    return out;
  }

  /** Keep block `key`'s data (a copy the caller no longer changes). */
  save(key: string, data: BlockData): void {
    if (data.byteLength > this.capacity) return;
    const had = this.mem.get(key);
    if (had) {
      this.bytes -= had.byteLength;
      this.mem.delete(key);
    }
    this.mem.set(key, data);
    this.bytes += data.byteLength;
    this.counts.savedBlocks++;
    while (this.bytes > this.capacity) {
      const [k, d] = this.mem.entries().next().value as [string, BlockData];
      this.mem.delete(k);
      this.bytes -= d.byteLength;
      this.counts.droppedBlocks++;
      if (this.dir) this.writeDisk(k, d);
    }
  }

  has(key: string): boolean {
    return this.mem.has(key) || this.onDisk.has(key);
  }

  /** Block `key`'s data, or null (a miss, or a disk file that cannot be read). Counts a load. */
  load(key: string): BlockData | null {
    let d = this.mem.get(key) ?? null;
    if (d) {
      this.mem.delete(key); // most recently used
      this.mem.set(key, d);
    } else if (this.onDisk.has(key)) {
      try {
        const buf = readFileSync(this.path(key));
        d = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4).slice();
      } catch {
        this.onDisk.delete(key);
        return null;
      }
    }
    if (d) this.counts.loadedBlocks++;
    return d;
  }

  /** Forget everything (memory and this tier's disk files). */
  clear(): void {
    this.mem.clear();
    this.bytes = 0;
    for (const k of this.onDisk) {
      try {
        unlinkSync(this.path(k));
      } catch {
        /* already gone */
      }
    }
    this.onDisk.clear();
  }

  private path(key: string): string {
    return join(this.dir!, `${key}.kv`);
  }

  private writeDisk(key: string, d: BlockData): void {
    try {
      const final = this.path(key);
      if (!existsSync(final)) {
        const tmp = `${final}.${process.pid}.tmp`;
        writeFileSync(tmp, new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
        renameSync(tmp, final);
      }
      this.onDisk.add(key);
    } catch {
      /* a full or read-only disk only loses the copy */
    }
  }
}
