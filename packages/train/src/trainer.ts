// The `torchts train` loop (TorchTitan's Trainer): build the model of the config, its data, optimizer
// and schedule; resume from a checkpoint when there is one; run the steps (each: the micro-batches'
// forward and backward, clipping, AdamW, one LR step), log metrics every log_freq steps, checkpoint every
// interval steps; at the end write the plot. Launch it with `npx torchts run` for data parallelism.
import { join } from "node:path";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as torch from "torchts";
import type { Tensor } from "torchts";
import { AutoTokenizer, type PreTrainedTokenizer, type PretrainedConfig } from "torchts/transformers";
import { validateJob, type JobConfig } from "./config/job.js";
import { ConfigError } from "./config/parse.js";
import { datasetFile, loadTokenStream } from "./data/dataset.js";
import { PackedLoader, type LoaderState } from "./data/loader.js";
import { wsdScheduler } from "./lr.js";
import { applyActivationCheckpointing } from "./model/activation_checkpoint.js";
import { buildConfig, countParams, createModel, flopsPerToken, hfConfigFor, initWeights, type CausalLM } from "./model/build.js";
import { CheckpointManager, type TrainState } from "./checkpoint.js";
import { MetricsLogger } from "./metrics/logger.js";
import { measurePeakFlops } from "./metrics/peak.js";
import { lastPerStep, metricsPlotPng } from "./metrics/plot.js";
import { batchPlan, dataParallelRank, parallelDims, unsupported, type ParallelDims } from "./parallel.js";
import { distributedFeatures, wrapDataParallel } from "./distributed.js";

// torch.distributed, not the "torchts/distributed" entry: the repository CLI maps only "torchts" and
// "torchts/transformers" to the sources (@torchts/serve/cli's tsconfig), so another entry could load a
// second copy of torchts (its built dist/) whose Tensor class is not this one
const dist = torch.distributed;

const dcpState = dist.checkpoint.stateDict;

export const DEBUG_TOKENIZER_DIR = fileURLToPath(new URL("../assets/tokenizer/", import.meta.url));

export interface TrainOptions {
  /** Console lines (default stdout). */
  out?: (line: string) => void;
}

export interface TrainResult {
  /** The metric records this run logged. */
  records: Record<string, unknown>[];
  /** The step it resumed from (0: a fresh start). */
  startStep: number;
  steps: number;
  params: number;
  flopsPerToken: number;
  peakFlops: number;
  dims: ParallelDims;
}

export async function loadTokenizer(hfAssetsPath: string): Promise<PreTrainedTokenizer> {
  try {
    return await AutoTokenizer.fromPretrained(hfAssetsPath || DEBUG_TOKENIZER_DIR);
  } catch (e) {
    throw new ConfigError(`model.hf_assets_path: ${(e as Error).message}`);
  }
}

/** Everything `--validate` prints: the resolved model and parallel layout, without allocating the model. */
export function describeJob(c: JobConfig, world: number): { cfg: PretrainedConfig; params: number; flopsPerToken: number; dims: ParallelDims; globalBatch: number; accumulation: number } {
  validateJob(c);
  const cfg = buildConfig(hfConfigFor(c.model.name, c.model.flavor, c.model.hf_assets_path));
  if (c.training.seq_len > cfg.maxPositionEmbeddings)
    throw new ConfigError(`training.seq_len (${c.training.seq_len}) exceeds the model's max_position_embeddings (${cfg.maxPositionEmbeddings})`);
  const counts = countParams(cfg);
  const dims = parallelDims(c.parallelism, world);
  const { globalBatch, accumulation } = batchPlan(c.training, dims.dp);
  return { cfg, params: counts.params, flopsPerToken: flopsPerToken(cfg, counts, c.training.seq_len), dims, globalBatch, accumulation };
}

const yieldToEventLoop = () => new Promise<void>((r) => setImmediate(r));

export async function train(c: JobConfig, o: TrainOptions = {}): Promise<TrainResult> {
  const world = Number(process.env.WORLD_SIZE ?? 1);
  const rank = Number(process.env.RANK ?? 0);
  const job = describeJob(c, world);
  const { cfg, dims, accumulation } = job;
  const features = distributedFeatures();
  const missing = unsupported(dims, features);
  if (missing) throw new ConfigError(missing);
  const print = rank === 0 ? (o.out ?? ((l: string) => process.stdout.write(`${l}\n`))) : () => {};
  if (world > 1 && !dist.isInitialized()) await dist.initProcessGroup({ backend: "gloo" });
  const t = c.training;
  const device = t.device;
  torch.setEagerMode(t.eager_mode);
  if (c.job.description) print(c.job.description);

  const tok = await loadTokenizer(c.model.hf_assets_path);
  if (tok.vocabSize > cfg.vocabSize) throw new ConfigError(`the tokenizer has ${tok.vocabSize} tokens, more than the model's vocab_size ${cfg.vocabSize}`);
  const tokens = loadTokenStream(datasetFile(t.dataset, t.dataset_path), tok, t.dataset_text_field);
  const dpRank = dataParallelRank(dims, rank);
  const loader = new PackedLoader(tokens, { seqLen: t.seq_len, localBatchSize: t.local_batch_size, accumulation, dpRank, dpDegree: dims.dp, seed: t.seed, device });

  torch.manualSeed(t.seed);
  const lm: CausalLM = createModel(cfg, device);
  initWeights(lm, t.seed);
  const ac = c.activation_checkpoint;
  const wrapped = ac.mode === "none" ? 0 : applyActivationCheckpointing(lm, ac.mode === "full" ? 1 : Number(ac.selective_ac_option));
  const model = wrapDataParallel(lm, dims, { reshardAfterForward: c.parallelism.fsdp_reshard_after_forward });
  const params = [...lm.parameters()];
  const opt = new torch.optim.AdamW(params, {
    lr: c.optimizer.lr, betas: [c.optimizer.beta1, c.optimizer.beta2], eps: c.optimizer.eps, weightDecay: c.optimizer.weight_decay,
  });
  const sched = wsdScheduler(opt, {
    steps: t.steps, warmupSteps: c.lr_scheduler.warmup_steps, decayRatio: c.lr_scheduler.decay_ratio, decayType: c.lr_scheduler.decay_type, minLrFactor: c.lr_scheduler.min_lr_factor,
  });

  const ckptFolder = join(c.job.dump_folder, c.checkpoint.folder);
  // DCP where torchts has it (every rank writes its pieces); else torch.save files (replicas share
  // their state: rank 0 writes it)
  const backend = features.dcp ? "dcp" : "file";
  const ckpt = new CheckpointManager({
    folder: ckptFolder, keepLatestK: c.checkpoint.keep_latest_k, async: c.checkpoint.async_mode === "async", backend, rank, writes: rank === 0,
    barrier: world > 1 ? async () => void dist.barrier() : undefined,
  });
  const liveState = (step: number): TrainState =>
    backend === "dcp"
      ? { step, model: dcpState.getModelStateDict(lm), optimizer: dcpState.getOptimizerStateDict(lm, opt), lr_scheduler: sched.stateDict(), dataloader: { ...loader.state }, rng: torch.getRngState() }
      : { step, model: lm.stateDict(), optimizer: opt.stateDict(), lr_scheduler: sched.stateDict(), dataloader: { ...loader.state }, rng: torch.getRngState() };
  let start = 0;
  const resumeStep = c.checkpoint.enable || c.checkpoint.load_step > 0 ? ckpt.resolveLoadStep(c.checkpoint.load_step) : null;
  if (resumeStep !== null) {
    const s = await ckpt.load(resumeStep, liveState(0));
    if (backend === "dcp") dcpState.setStateDict(lm, opt, { optimStateDict: s.optimizer as Parameters<typeof dcpState.setStateDict>[2]["optimStateDict"] });
    else {
      lm.loadStateDict(s.model);
      opt.loadStateDict(s.optimizer as Parameters<typeof opt.loadStateDict>[0]);
    }
    sched.loadStateDict(s.lr_scheduler);
    loader.loadState(s.dataloader as LoaderState);
    torch.setRngState(s.rng as ReturnType<typeof torch.getRngState>);
    start = s.step;
    if (start >= t.steps) throw new ConfigError(`checkpoint step ${start} is not before training.steps (${t.steps}): nothing to train`);
  }

  const amp = t.mixed_precision_param === "bfloat16" ? "bfloat16" : null;
  const peak = c.metrics.peak_tflops > 0 ? c.metrics.peak_tflops * 1e12 : await measurePeakFlops(device, amp ?? "float32");
  const V = cfg.vocabSize;
  const F = torch.nn.functional;
  const [B, T] = [t.local_batch_size, t.seq_len];
  // the mask and positions are arguments, so a compiled step builds its mask on the device and replays
  const attentionMask = torch.ones([B, T], { dtype: "int64", device });
  const positionIds = torch.arange(T, { dtype: "int64", device }).unsqueeze(0).expand(B, T).contiguous();

  const microLoss = (x: Tensor, y: Tensor, am: Tensor, pos: Tensor): Tensor => {
    const run = () => F.crossEntropy(model.forward(x, { attentionMask: am, positionIds: pos }).logits.view(-1, V).float(), y.view(-1));
    return amp ? torch.autocast(device, run, { dtype: amp }) : run();
  };
  const maxNorm = t.max_norm > 0 ? t.max_norm : Infinity;
  const trainStep = (xs: Tensor[], ys: Tensor[], am: Tensor, pos: Tensor): [Tensor, Tensor] => {
    opt.zeroGrad({ setToNone: true });
    let total: Tensor | null = null;
    for (let m = 0; m < xs.length; m++) {
      // micro-batches before the last accumulate locally; the last one's backward reduces the sum
      const micro = () => {
        const loss = microLoss(xs[m]!, ys[m]!, am, pos);
        (xs.length > 1 ? loss.div(xs.length) : loss).backward();
        return loss.detach();
      };
      const loss = m < xs.length - 1 ? model.noSync(micro) : micro();
      total = total ? total.add(loss) : loss;
    }
    const gradNorm = model.clipGradNorm(params, maxNorm);
    opt.step();
    return [xs.length > 1 ? total!.div(xs.length) : total!, gradNorm];
  };
  // a compiled step is one traced graph: the collectives DDP and FSDP launch from hooks cannot be in it
  // (torchts compiles no collectives yet), so data-parallel steps run eagerly
  const compiled = c.compile.enable && dims.dp === 1;
  const step = compiled ? torch.compile(trainStep, { modules: [lm], name: "train_step" }) : trainStep;

  const fpt = job.flopsPerToken;
  const nEmb = cfg.vocabSize * cfg.hiddenSize;
  print(
    `model ${c.model.name} ${c.model.flavor} (${cfg.architectures[0] ?? cfg.modelType}): ${job.params.toLocaleString("en-US")} parameters` +
      `${cfg.tieWordEmbeddings ? " (tied embedding)" : `, ${(job.params - nEmb).toLocaleString("en-US")} without the embedding`}; ` +
      `${cfg.numHiddenLayers} layers, ${cfg.numAttentionHeads} heads of ${cfg.headDim}, vocab ${cfg.vocabSize}`,
  );
  print(
    `flops/token = 6 x ${(cfg.tieWordEmbeddings ? job.params : job.params - nEmb).toLocaleString("en-US")} + 12 x ${cfg.numHiddenLayers} x ${cfg.numAttentionHeads} x ${cfg.headDim} x ${T} = ${fpt.toLocaleString("en-US")}; ` +
      `peak ${(peak / 1e12).toFixed(4)} TFLOP/s (${c.metrics.peak_tflops > 0 ? "metrics.peak_tflops" : `measured ${amp ?? "float32"} matmul`})`,
  );
  print(
    `world ${world}: dp_replicate ${dims.dpReplicate} x dp_shard ${dims.dpShard} x tp ${dims.tp} x pp ${dims.pp} x cp ${dims.cp}; global batch ${job.globalBatch} x ${T} tokens ` +
      `(local ${B}, ${accumulation} micro-batch${accumulation > 1 ? "es" : ""}); ${loader.windows} sequences (${loader.stepsPerEpoch} steps per epoch); ` +
      `${compiled ? "compiled step" : `${t.eager_mode} eager${c.compile.enable ? " (compile.enable: torchts cannot compile the collectives of a data-parallel step yet)" : ""}`}${wrapped ? `, activation checkpointing on ${wrapped} layers` : ""}${amp ? ", bf16 autocast" : ""}`,
  );
  if (start) print(`resumed from ${ckpt.dirFor(start)} (step ${start})`);

  const jsonl = c.metrics.enable_jsonl ? join(c.job.dump_folder, "metrics.jsonl") : null;
  const metrics = new MetricsLogger(
    { flopsPerToken: fpt, peakFlops: peak, nonDataParallelSize: dims.nonDataParallelSize, logFreq: c.metrics.log_freq, totalSteps: t.steps, jsonlPath: jsonl, truncate: start === 0, progress: c.metrics.progress, rank, out: o.out },
    start,
  );
  try {
    for (let s = start + 1; s <= t.steps; s++) {
      const t0 = performance.now();
      const batch = await loader.next();
      const dataTime = (performance.now() - t0) / 1000;
      // an eager step runs in torch.scope: its activations and temporaries are freed as it ends
      // instead of waiting for the garbage collector (gradients, module state and optimizer state stay)
      const [loss, gradNorm] = compiled ? step(batch.inputs, batch.labels, attentionMask, positionIds) : torch.scope(() => step(batch.inputs, batch.labels, attentionMask, positionIds));
      let lossV = await loss.item();
      let maxLoss = lossV;
      const gn = await gradNorm.item();
      loss.dispose();
      gradNorm.dispose();
      const lr = sched.getLastLr()[0]!;
      sched.step();
      const logStep = s % c.metrics.log_freq === 0 || s === t.steps;
      if (logStep && dims.dp > 1) {
        // TorchTitan logs the loss averaged over the data-parallel ranks, and its max
        const avg = torch.tensor([lossV]);
        const mx = torch.tensor([lossV]);
        dist.allReduce(avg, { op: dist.ReduceOp.AVG });
        dist.allReduce(mx, { op: dist.ReduceOp.MAX });
        [lossV, maxLoss] = [await avg.item(), await mx.item()];
      }
      metrics.step({ step: s, loss: lossV, maxLoss, gradNorm: gn, lr, tokens: batch.tokens, dataTime });
      if (c.checkpoint.enable && (s % c.checkpoint.interval === 0 || s === t.steps)) {
        const c0 = performance.now();
        await ckpt.save(s, liveState(s));
        metrics.excludeTime(performance.now() - c0);
      }
      await yieldToEventLoop(); // let finalizers return freed buffers to the pool
    }
    await ckpt.wait();
  } finally {
    metrics.close();
  }
  if (rank === 0 && c.metrics.enable_plot) {
    const { readFileSync } = await import("node:fs");
    const all = jsonl ? readFileSync(jsonl, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>) : metrics.records;
    const png = await metricsPlotPng(`${c.model.name} ${c.model.flavor}: ${t.steps} steps`, lastPerStep(all), [
      { title: "loss", key: "loss_metrics/global_avg_loss" },
      { title: "MFU (%)", key: "mfu(%)" },
    ]);
    writeFileSync(join(c.job.dump_folder, "metrics.png"), png);
  }
  if (world > 1) await dist.destroyProcessGroup();
  return { records: metrics.records, startStep: start, steps: t.steps, params: job.params, flopsPerToken: fpt, peakFlops: peak, dims };
}
