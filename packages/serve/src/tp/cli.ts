// The `--tensor-parallel-size N` (`-tp N`) part of `torchts serve` (main.ts): the flag's spelling,
// the checks made before any weight loads, and the start of the group.
import { availableParallelism } from "node:os";
import * as torch from "torchts";
import { AutoConfig, type PreTrainedModel } from "torchts/transformers";
import { TensorParallelGroup } from "./executor.js";
import { tensorParallelError } from "./shard.js";

/** vLLM's `-tp N` / `-tp=N` as `--tensor-parallel-size` (parseArgs knows one-letter short options only). */
export function tensorParallelArgv(argv: string[]): string[] {
  return argv.map((a) => (a === "-tp" ? "--tensor-parallel-size" : a.startsWith("-tp=") ? `--tensor-parallel-size=${a.slice(4)}` : a));
}

/**
 * Whether `size` ranks can serve `modelDir` with these options; an exit code (2, after saying why on
 * stderr) when not, else null. Reads only config.json.
 */
export async function checkTensorParallel(
  size: number,
  modelDir: string,
  o: { device: string; quantization?: string; hicacheSize?: number; kvTransfer?: boolean },
): Promise<number | null> {
  const refuse = (why: string) => {
    process.stderr.write(`torchts serve: --tensor-parallel-size ${size}: ${why}\n`);
    return 2;
  };
  if (o.device !== "cpu") return refuse(`the ranks communicate host memory: only --device cpu is supported, got '${o.device}'`);
  if (o.quantization !== undefined) return refuse("--quantization is not supported with tensor parallelism");
  if ((o.hicacheSize ?? 0) > 0) return refuse("--hicache-size is not supported with tensor parallelism (each rank holds only its own kv heads)");
  if (o.kvTransfer) return refuse("--kv-transfer is not supported with tensor parallelism (each rank holds only its own kv heads)");
  let why: string | null;
  try {
    why = tensorParallelError(await AutoConfig.fromPretrained(modelDir), size);
  } catch (e) {
    process.stderr.write(`torchts serve: ${(e as Error).message}\n`);
    return 1;
  }
  return why === null ? null : refuse(why);
}

/**
 * Start the workers and shard `model` (loaded here, this process being rank 0). The cores are shared
 * out among the ranks unless TORCHTS_NUM_THREADS says otherwise. False (after saying why) on failure.
 */
export async function joinTensorParallel(model: PreTrainedModel, size: number, modelDir: string, dtype?: string): Promise<TensorParallelGroup | false> {
  const env: Record<string, string> = {};
  if (!process.env.TORCHTS_NUM_THREADS) {
    const threads = Math.max(1, Math.floor(availableParallelism() / size));
    torch.backends.cpu.setNumThreads(threads);
    env.TORCHTS_NUM_THREADS = String(threads);
  }
  const log = (line: string) => process.stdout.write(`torchts serve: ${line}\n`);
  try {
    return await TensorParallelGroup.start(model, { size, modelDir, dtype, env, log });
  } catch (e) {
    process.stderr.write(`torchts serve: tensor parallel start-up failed: ${(e as Error).message}\n`);
    return false;
  }
}
