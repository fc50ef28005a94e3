// Shared by the example trainers: flags, device selection, the progress bar (as minGPT's) and
// checkpoint/resume through torch.save/torch.load (model, optimizer, RNG state, step, extras).
import { existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import * as torch from "../../packages/torchts/src/index.js";

/** `--key value` and bare `--flag` (= "true"). */
function parseArgs(argv = process.argv.slice(2)): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i]!.startsWith("--")) continue;
    const k = argv[i]!.slice(2);
    const v = argv[i + 1] && !argv[i + 1]!.startsWith("--") ? argv[++i]! : "true";
    out[k] = v;
  }
  return out;
}

export function numArg(a: Record<string, string>, k: string, d: number): number {
  if (a[k] === undefined) return d;
  const v = Number(a[k]);
  if (!Number.isFinite(v)) throw new RangeError(`--${k}: expected a number, got '${a[k]}'`);
  return v;
}

/**
 * The device named by --device: "cpu", or "webgpu" (initialised first when this build ships the
 * WebGPU device). An unknown or unavailable device fails with torch's own error.
 */
async function setupDevice(name: string): Promise<string> {
  if (name.startsWith("webgpu")) {
    // a computed path: the WebGPU module is optional in a build
    const mod = "../../packages/torchts/src/webgpu.js";
    const webgpu = (await import(mod).catch(() => null)) as { init(): Promise<boolean>; unavailableReason(): string } | null;
    if (webgpu && !(await webgpu.init())) throw new Error(`--device ${name}: WebGPU is unavailable: ${webgpu.unavailableReason()}`);
  }
  torch.zeros(1).to(name); // raises torch's "Expected one of the registered device types ..." for unknown devices
  return name;
}

/**
 * The trainers' common start: parse the flags, set up --device (default cpu), the eager --mode
 * (default strict) and the --seed.
 */
export async function setupRun(defaultSeed = 0): Promise<{ args: Record<string, string>; device: string }> {
  const args = parseArgs();
  const device = await setupDevice(args.device ?? "cpu");
  torch.setEagerMode((args.mode as torch.EagerMode) ?? "strict");
  torch.manualSeed(numArg(args, "seed", defaultSeed));
  return { args, device };
}

/** A small seeded PRNG for the generated datasets (keeps torch's RNG free for training). */
export { mulberry32 } from "../../packages/torchts/src/utils/prng.js";

function fmtTime(s: number): string {
  const r = Math.round(s);
  return r >= 60 ? `${Math.floor(r / 60)}m${String(r % 60).padStart(2, "0")}s` : `${r}s`;
}

/**
 * Let the event loop run. Tensor memory is released by a FinalizationRegistry, whose callbacks
 * only run between macrotasks; a loop whose awaits all resolve immediately (cpu reads) would
 * otherwise keep every step's buffers alive.
 */
function yieldToEventLoop(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

/**
 * A one-line progress bar: step, smoothed loss, throughput and ETA (stderr on a TTY, else every
 * 10%). `await bar.update(...)` once per step also yields to the event loop (see yieldToEventLoop).
 */
export class Progress {
  private t0 = performance.now();
  private ema = 0;
  private n = 0;
  private readonly tty = process.stderr.isTTY;
  constructor(
    readonly total: number,
    readonly unit: string,
    readonly firstStep = 1,
  ) {}
  async update(step: number, loss: number, itemsThisStep: number, extra = ""): Promise<void> {
    this.ema = this.n++ === 0 ? loss : 0.9 * this.ema + 0.1 * loss;
    const el = (performance.now() - this.t0) / 1000;
    const done = step - this.firstStep + 1;
    const w = 24;
    const filled = Math.round((w * step) / this.total);
    const rate = (done * itemsThisStep) / Math.max(el, 1e-9);
    const eta = (el / done) * (this.total - step);
    const line = `[${"#".repeat(filled)}${".".repeat(w - filled)}] step ${step}/${this.total} loss ${this.ema.toFixed(4)} ${rate.toFixed(0)} ${this.unit}/s ETA ${fmtTime(eta)}${extra ? " " + extra : ""}`;
    if (this.tty) process.stderr.write(`\r${line}`);
    else if (step % Math.max(1, Math.floor(this.total / 10)) === 0 || step === this.total) console.log(line);
    await yieldToEventLoop();
  }
  end(): void {
    if (this.tty) process.stderr.write("\n");
  }
  elapsed(): number {
    return (performance.now() - this.t0) / 1000;
  }
}

interface TrainState {
  step: number;
  losses: number[];
  [k: string]: unknown;
}

/** Save model + optimizer + RNG + state atomically (a kill mid-write keeps the previous file). */
async function saveCheckpoint(
  path: string,
  model: InstanceType<typeof torch.nn.Module>,
  opt: InstanceType<typeof torch.optim.Optimizer>,
  state: TrainState,
): Promise<void> {
  mkdirSync(dirname(path), { recursive: true });
  await torch.save({ model: model.stateDict(), optim: opt.stateDict(), rng: torch.getRngState(), ...state }, path);
}

/** Restore what saveCheckpoint wrote; returns null when there is no checkpoint. */
async function loadCheckpoint(
  path: string,
  model: InstanceType<typeof torch.nn.Module>,
  opt: InstanceType<typeof torch.optim.Optimizer>,
  device = "cpu",
): Promise<TrainState | null> {
  if (!existsSync(path)) return null;
  const c = await torch.load(path, { mapLocation: device });
  model.loadStateDict(c.model);
  opt.loadStateDict(c.optim);
  torch.setRngState(c.rng);
  const { model: _m, optim: _o, rng: _r, ...state } = c;
  return state as TrainState;
}

/** `--resume`: restore model, optimizer and RNG from `path` if it exists; where the run starts. */
export async function resumeIfAsked(
  args: Record<string, string>,
  path: string,
  model: InstanceType<typeof torch.nn.Module>,
  opt: InstanceType<typeof torch.optim.Optimizer>,
  device = "cpu",
): Promise<{ start: number; losses: number[] }> {
  if (!args.resume) return { start: 0, losses: [] };
  const s = await loadCheckpoint(path, model, opt, device);
  if (!s) return { start: 0, losses: [] };
  console.log(`resumed from ${path} at step ${s.step}`);
  return { start: s.step, losses: s.losses };
}

/**
 * The end of a training step: record the loss, advance the bar, and checkpoint every `every`
 * steps and at the last one.
 */
export async function recordStep(
  step: number,
  loss: torch.Tensor,
  itemsThisStep: number,
  r: {
    bar: Progress;
    losses: number[];
    every: number;
    path: string;
    model: InstanceType<typeof torch.nn.Module>;
    opt: InstanceType<typeof torch.optim.Optimizer>;
  },
): Promise<void> {
  r.losses.push(await loss.item());
  await r.bar.update(step, r.losses[r.losses.length - 1]!, itemsThisStep);
  if (step % r.every === 0 || step === r.bar.total) await saveCheckpoint(r.path, r.model, r.opt, { step, losses: r.losses });
}

/** Mean of the last k values. */
export function tailMean(xs: number[], k: number): number {
  const t = xs.slice(-k);
  return t.reduce((a, b) => a + b, 0) / t.length;
}
