// Step metrics every log_freq steps, under TorchTitan's names (components/metrics.py): loss (global
// average and max over the data-parallel ranks), grad norm, tokens/s per device, TFLOP/s, MFU, memory,
// end-to-end and data-loading time. Printed as a line, appended to a JSONL file (synchronously, so a
// killed run keeps what it logged), and shown on a progress bar when stderr is a terminal.
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { totalmem } from "node:os";
import { dirname } from "node:path";
import cliProgress from "cli-progress";
import * as torch from "torchts";

export interface StepSample {
  step: number;
  /** This step's loss, averaged over the data-parallel ranks, and its max over them. */
  loss: number;
  maxLoss: number;
  gradNorm: number;
  lr: number;
  /** Tokens this rank trained on in the step. */
  tokens: number;
  /** Seconds spent building the step's batch. */
  dataTime: number;
}

export interface MetricsOptions {
  flopsPerToken: number;
  /** FLOP/s of one device (for MFU). */
  peakFlops: number;
  /** Devices that share one data-parallel rank's tokens (TP x PP x CP). */
  nonDataParallelSize: number;
  logFreq: number;
  totalSteps: number;
  /** Append the records here (null: no file). */
  jsonlPath: string | null;
  /** Start the file afresh (a new run) or append (a resumed one). */
  truncate: boolean;
  progress: "auto" | "always" | "never";
  /** Only rank 0 prints and writes. */
  rank: number;
  /** Console lines go here (default stdout). */
  out?: (line: string) => void;
}

const GIB = 1024 ** 3;

export class MetricsLogger {
  readonly records: Record<string, unknown>[] = [];
  private last = performance.now();
  private tokens = 0;
  private dataTime = 0;
  private steps = 0;
  private tokensSeen = 0;
  private bar: cliProgress.SingleBar | null = null;
  private multi: cliProgress.MultiBar | null = null;
  private readonly print: (line: string) => void;

  constructor(readonly o: MetricsOptions, startStep = 0) {
    const quiet = o.rank !== 0;
    const write = o.out ?? ((l: string) => process.stdout.write(`${l}\n`));
    this.print = quiet ? () => {} : write;
    if (!quiet && o.jsonlPath) {
      mkdirSync(dirname(o.jsonlPath), { recursive: true });
      if (o.truncate) writeFileSync(o.jsonlPath, "");
    }
    const tty = process.stderr.isTTY === true;
    if (!quiet && (o.progress === "always" || (o.progress === "auto" && tty))) {
      this.multi = new cliProgress.MultiBar(
        { format: "{bar} {value}/{total} steps | loss {loss} | {tps} tok/s | eta {eta_formatted}", hideCursor: true, noTTYOutput: !tty, stream: process.stderr, clearOnComplete: false },
        cliProgress.Presets.shades_classic,
      );
      this.bar = this.multi.create(o.totalSteps, startStep, { loss: "-", tps: "-" });
    }
    torch.memory.resetPeakStats();
  }

  /** Say something above the bar. */
  info(line: string): void {
    if (this.o.rank !== 0) return;
    if (this.multi) this.multi.log(`${line}\n`);
    else this.print(line);
  }

  /** Record a finished step; every log_freq steps (and the last) emit a record, which is returned. */
  step(s: StepSample): Record<string, unknown> | null {
    this.tokens += s.tokens;
    this.tokensSeen += s.tokens;
    this.dataTime += s.dataTime;
    this.steps++;
    this.bar?.update(s.step, { loss: s.loss.toFixed(4) });
    if (s.step % this.o.logFreq !== 0 && s.step !== this.o.totalSteps) return null;
    const now = performance.now();
    const dt = (now - this.last) / 1000;
    const tps = this.tokens / (dt * this.o.nonDataParallelSize);
    const tflops = (this.o.flopsPerToken * tps) / 1e12;
    const mfu = (100 * this.o.flopsPerToken * tps) / this.o.peakFlops;
    const mem = torch.memory.stats();
    const rec: Record<string, unknown> = {
      step: s.step,
      "loss_metrics/global_avg_loss": s.loss,
      "loss_metrics/global_max_loss": s.maxLoss,
      grad_norm: s.gradNorm,
      lr: s.lr,
      "throughput(tps)": tps,
      tflops,
      "mfu(%)": mfu,
      "memory/max_active(GiB)": mem.peakBytes / GIB,
      "memory/max_active(%)": (100 * mem.peakBytes) / totalmem(),
      "time_metrics/end_to_end(s)": dt / this.steps,
      "time_metrics/data_loading(s)": this.dataTime / this.steps,
      "time_metrics/data_loading(%)": (100 * this.dataTime) / dt,
      n_tokens_seen: this.tokensSeen,
      time: Date.now() / 1000,
    };
    this.records.push(rec);
    if (this.o.rank === 0 && this.o.jsonlPath) appendFileSync(this.o.jsonlPath, `${JSON.stringify(rec)}\n`);
    this.info(
      `step: ${String(s.step).padStart(5)}  loss: ${s.loss.toFixed(5)}  grad_norm: ${s.gradNorm.toFixed(4)}  memory: ${(mem.peakBytes / GIB).toFixed(2)}GiB  ` +
        `tps: ${Math.round(tps).toLocaleString("en-US")}  tflops: ${fixedSig(tflops, 4)}  mfu: ${fixedSig(mfu, 2)}%  data: ${((100 * this.dataTime) / dt).toFixed(1)}%`,
    );
    this.bar?.update(s.step, { loss: s.loss.toFixed(4), tps: Math.round(tps).toLocaleString("en-US") });
    this.last = now;
    this.tokens = 0;
    this.dataTime = 0;
    this.steps = 0;
    torch.memory.resetPeakStats();
    return rec;
  }

  /** Time spent outside the steps (checkpoint writes) does not count toward the next window's throughput. */
  excludeTime(ms: number): void {
    this.last += ms;
  }

  close(): void {
    this.multi?.stop();
    this.multi = null;
    this.bar = null;
  }
}

/**
 * `x` with `digits` decimals, or more where that leaves under 3 significant digits: a small model on
 * a slow CPU logs ~0.0006 TFLOP/s, which 4 decimals would print 5% off.
 */
export function fixedSig(x: number, digits: number): string {
  if (!(x > 0) || !Number.isFinite(x)) return x.toFixed(digits);
  return x.toFixed(Math.min(20, Math.max(digits, 2 - Math.floor(Math.log10(x)))));
}
