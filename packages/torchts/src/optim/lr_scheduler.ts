// torch.optim.lr_scheduler: PyTorch's chainable (recursive) schedules, so lr sequences match
// PyTorch's floating-point values; step(epoch) uses the closed form where PyTorch does.
import type { Optimizer } from "./optimizer.js";

export abstract class LRScheduler {
  baseLrs: number[];
  lastEpoch: number;
  _stepCount = 0;
  _lastLr: number[] = [];

  constructor(
    public optimizer: Optimizer,
    lastEpoch = -1,
  ) {
    if (lastEpoch === -1) for (const g of optimizer.paramGroups) g.initialLr ??= g.lr;
    else
      optimizer.paramGroups.forEach((g, i) => {
        if (g.initialLr === undefined)
          throw new Error(`param 'initial_lr' is not specified in param_groups[${i}] when resuming an optimizer`);
      });
    this.baseLrs = optimizer.paramGroups.map((g) => g.initialLr as number);
    this.lastEpoch = lastEpoch;
  }
  /** Subclass constructors call this last (PyTorch's _initial_step). */
  protected _initialStep(): void {
    this._stepCount = 0;
    this.step();
  }
  abstract getLr(): number[];
  _getClosedFormLr?(): number[];

  step(epoch?: number): void {
    this._stepCount++;
    let values: number[];
    if (epoch === undefined) {
      this.lastEpoch++;
      values = this.getLr();
    } else {
      this.lastEpoch = epoch;
      values = this._getClosedFormLr ? this._getClosedFormLr() : this.getLr();
    }
    this.optimizer.paramGroups.forEach((g, i) => (g.lr = values[i]!));
    this._lastLr = this.optimizer.paramGroups.map((g) => g.lr);
  }
  getLastLr(): number[] {
    return [...this._lastLr];
  }
  protected get lrs(): number[] {
    return this.optimizer.paramGroups.map((g) => g.lr);
  }
  /** Everything but the optimizer (and functions, which cannot be serialised). */
  stateDict(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(this)) {
      if (k === "optimizer" || typeof v === "function") continue;
      if (Array.isArray(v) && v.some((x) => typeof x === "function" || x instanceof LRScheduler)) continue;
      out[k] = structuredClone(v);
    }
    return out;
  }
  loadStateDict(sd: Record<string, unknown>): void {
    for (const [k, v] of Object.entries(sd)) (this as Record<string, unknown>)[k] = structuredClone(v);
  }
}

export class StepLR extends LRScheduler {
  constructor(opt: Optimizer, public stepSize: number, public gamma = 0.1, lastEpoch = -1) {
    super(opt, lastEpoch);
    this._initialStep();
  }
  getLr(): number[] {
    if (this.lastEpoch === 0 || this.lastEpoch % this.stepSize !== 0) return this.lrs;
    return this.lrs.map((l) => l * this.gamma);
  }
  override _getClosedFormLr(): number[] {
    return this.baseLrs.map((b) => b * this.gamma ** Math.floor(this.lastEpoch / this.stepSize));
  }
}

export class MultiStepLR extends LRScheduler {
  milestones: number[];
  constructor(opt: Optimizer, milestones: number[], public gamma = 0.1, lastEpoch = -1) {
    super(opt, lastEpoch);
    this.milestones = [...milestones].sort((a, b) => a - b);
    this._initialStep();
  }
  getLr(): number[] {
    const count = this.milestones.filter((m) => m === this.lastEpoch).length;
    if (count === 0) return this.lrs;
    return this.lrs.map((l) => l * this.gamma ** count);
  }
  override _getClosedFormLr(): number[] {
    const passed = this.milestones.filter((m) => m <= this.lastEpoch).length;
    return this.baseLrs.map((b) => b * this.gamma ** passed);
  }
}

export class ConstantLR extends LRScheduler {
  constructor(opt: Optimizer, public factor = 1 / 3, public totalIters = 5, lastEpoch = -1) {
    if (factor > 1 || factor < 0) throw new RangeError("Constant multiplicative factor expected to be between 0 and 1.");
    super(opt, lastEpoch);
    this._initialStep();
  }
  getLr(): number[] {
    if (this.lastEpoch === 0) return this.lrs.map((l) => l * this.factor);
    if (this.lastEpoch !== this.totalIters) return this.lrs;
    return this.lrs.map((l) => l * (1 / this.factor));
  }
  override _getClosedFormLr(): number[] {
    return this.baseLrs.map((b) => b * (this.factor + (this.lastEpoch >= this.totalIters ? 1 - this.factor : 0)));
  }
}

export class LinearLR extends LRScheduler {
  startFactor: number;
  endFactor: number;
  totalIters: number;
  constructor(opt: Optimizer, o: { startFactor?: number; endFactor?: number; totalIters?: number; lastEpoch?: number } = {}) {
    const sf = o.startFactor ?? 1 / 3;
    const ef = o.endFactor ?? 1;
    if (sf > 1 || sf <= 0)
      throw new RangeError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.");
    if (ef > 1 || ef < 0) throw new RangeError("Ending multiplicative factor expected to be between 0 and 1.");
    super(opt, o.lastEpoch ?? -1);
    this.startFactor = sf;
    this.endFactor = ef;
    this.totalIters = o.totalIters ?? 5;
    this._initialStep();
  }
  getLr(): number[] {
    const { startFactor: s, endFactor: e, totalIters: n, lastEpoch: t } = this;
    if (t === 0) return this.lrs.map((l) => l * s);
    if (t > n) return this.lrs;
    return this.lrs.map((l) => l * (1 + (e - s) / (n * s + (t - 1) * (e - s))));
  }
  override _getClosedFormLr(): number[] {
    const { startFactor: s, endFactor: e, totalIters: n, lastEpoch: t } = this;
    return this.baseLrs.map((b) => b * (s + ((e - s) * Math.min(n, t)) / n));
  }
}

export class ExponentialLR extends LRScheduler {
  constructor(opt: Optimizer, public gamma: number, lastEpoch = -1) {
    super(opt, lastEpoch);
    this._initialStep();
  }
  getLr(): number[] {
    if (this.lastEpoch === 0) return this.lrs;
    return this.lrs.map((l) => l * this.gamma);
  }
  override _getClosedFormLr(): number[] {
    return this.baseLrs.map((b) => b * this.gamma ** this.lastEpoch);
  }
}

export class CosineAnnealingLR extends LRScheduler {
  constructor(opt: Optimizer, public TMax: number, public etaMin = 0, lastEpoch = -1) {
    super(opt, lastEpoch);
    this._initialStep();
  }
  getLr(): number[] {
    const { TMax: T, etaMin: m, lastEpoch: t } = this;
    if (t === 0) return this.lrs;
    if (this._stepCount === 1 && t > 0)
      return this.baseLrs.map((b) => m + ((b - m) * (1 + Math.cos((t * Math.PI) / T))) / 2);
    if ((t - 1 - T) % (2 * T) === 0)
      return this.lrs.map((l, i) => l + ((this.baseLrs[i]! - m) * (1 - Math.cos(Math.PI / T))) / 2);
    return this.lrs.map((l) => ((1 + Math.cos((Math.PI * t) / T)) / (1 + Math.cos((Math.PI * (t - 1)) / T))) * (l - m) + m);
  }
  override _getClosedFormLr(): number[] {
    const { TMax: T, etaMin: m, lastEpoch: t } = this;
    return this.baseLrs.map((b) => m + ((b - m) * (1 + Math.cos((Math.PI * t) / T))) / 2);
  }
}

export class LambdaLR extends LRScheduler {
  lrLambdas: ((epoch: number) => number)[];
  constructor(opt: Optimizer, lrLambda: ((epoch: number) => number) | ((epoch: number) => number)[], lastEpoch = -1) {
    super(opt, lastEpoch);
    const n = opt.paramGroups.length;
    if (Array.isArray(lrLambda) && lrLambda.length !== n)
      throw new Error(`Expected ${n} lr_lambdas, but got ${lrLambda.length}`);
    this.lrLambdas = Array.isArray(lrLambda) ? [...lrLambda] : new Array(n).fill(lrLambda);
    this._initialStep();
  }
  getLr(): number[] {
    return this.baseLrs.map((b, i) => b * this.lrLambdas[i]!(this.lastEpoch));
  }
}

export interface OneCycleOptions {
  totalSteps?: number;
  epochs?: number;
  stepsPerEpoch?: number;
  pctStart?: number;
  annealStrategy?: "cos" | "linear";
  cycleMomentum?: boolean;
  baseMomentum?: number | number[];
  maxMomentum?: number | number[];
  divFactor?: number;
  finalDivFactor?: number;
  threePhase?: boolean;
  lastEpoch?: number;
}

interface Phase {
  endStep: number;
  startLr: string;
  endLr: string;
  startMomentum: string;
  endMomentum: string;
}

export class OneCycleLR extends LRScheduler {
  totalSteps: number;
  phases: Phase[];
  annealStrategy: "cos" | "linear";
  cycleMomentum: boolean;
  useBeta1 = false;
  constructor(opt: Optimizer, maxLr: number | number[], o: OneCycleOptions = {}) {
    let total: number;
    if (o.totalSteps !== undefined) {
      if (o.totalSteps <= 0 || !Number.isInteger(o.totalSteps))
        throw new RangeError(`Expected positive integer total_steps, but got ${o.totalSteps}`);
      total = o.totalSteps;
    } else if (o.epochs !== undefined && o.stepsPerEpoch !== undefined) {
      if (o.epochs <= 0) throw new RangeError(`Expected positive integer epochs, but got ${o.epochs}`);
      if (o.stepsPerEpoch <= 0) throw new RangeError(`Expected positive integer steps_per_epoch, but got ${o.stepsPerEpoch}`);
      total = o.epochs * o.stepsPerEpoch;
    } else throw new Error("You must define either total_steps OR (epochs AND steps_per_epoch)");
    const pct = o.pctStart ?? 0.3;
    if (pct < 0 || pct > 1) throw new RangeError(`Expected float between 0 and 1 pct_start, but got ${pct}`);
    const per = (v: number | number[], name: string): number[] => {
      const n = opt.paramGroups.length;
      if (Array.isArray(v)) {
        if (v.length !== n) throw new Error(`expected ${n} values for ${name}, got ${v.length}`);
        return v;
      }
      return new Array<number>(n).fill(v);
    };
    const maxLrs = per(maxLr, "max_lr");
    const lastEpoch = o.lastEpoch ?? -1;
    const divF = o.divFactor ?? 25;
    const finalDivF = o.finalDivFactor ?? 1e4;
    if (lastEpoch === -1)
      opt.paramGroups.forEach((g, i) => {
        g.initialLr = maxLrs[i]! / divF;
        g.maxLr = maxLrs[i]!;
        g.minLr = g.initialLr / finalDivF;
      });
    const cycle = o.cycleMomentum ?? true;
    let useBeta1 = false;
    if (cycle) {
      if (!("momentum" in opt.defaults) && !("betas" in opt.defaults))
        throw new Error("optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
      useBeta1 = "betas" in opt.defaults;
      const maxM = per(o.maxMomentum ?? 0.95, "max_momentum");
      const baseM = per(o.baseMomentum ?? 0.85, "base_momentum");
      if (lastEpoch === -1)
        opt.paramGroups.forEach((g, i) => {
          if (useBeta1) g.betas = [maxM[i]!, ...(g.betas as number[]).slice(1)];
          else g.momentum = maxM[i]!;
          g.maxMomentum = maxM[i]!;
          g.baseMomentum = baseM[i]!;
        });
    }
    super(opt, lastEpoch);
    this.totalSteps = total;
    this.annealStrategy = o.annealStrategy ?? "cos";
    if (this.annealStrategy !== "cos" && this.annealStrategy !== "linear")
      throw new Error(`anneal_strategy must by one of 'cos' or 'linear', instead got ${String(this.annealStrategy)}`);
    this.cycleMomentum = cycle;
    this.useBeta1 = useBeta1;
    const ph = (endStep: number, startLr: string, endLr: string, startMomentum: string, endMomentum: string): Phase => ({
      endStep, startLr, endLr, startMomentum, endMomentum,
    });
    this.phases = o.threePhase
      ? [
          ph(pct * total - 1, "initialLr", "maxLr", "maxMomentum", "baseMomentum"),
          ph(2 * pct * total - 2, "maxLr", "initialLr", "baseMomentum", "maxMomentum"),
          ph(total - 1, "initialLr", "minLr", "maxMomentum", "maxMomentum"),
        ]
      : [
          ph(pct * total - 1, "initialLr", "maxLr", "maxMomentum", "baseMomentum"),
          ph(total - 1, "maxLr", "minLr", "baseMomentum", "maxMomentum"),
        ];
    this._initialStep();
  }
  _anneal(start: number, end: number, pct: number): number {
    if (this.annealStrategy === "linear") return (end - start) * pct + start;
    return end + ((start - end) / 2) * (Math.cos(Math.PI * pct) + 1);
  }
  getLr(): number[] {
    const t = this.lastEpoch;
    if (t > this.totalSteps)
      throw new Error(`Tried to step ${t} times. The specified number of total steps is ${this.totalSteps}`);
    return this.optimizer.paramGroups.map((g) => {
      let start = 0;
      let lr = 0;
      let mom = 0;
      for (let i = 0; i < this.phases.length; i++) {
        const p = this.phases[i]!;
        if (t <= p.endStep || i === this.phases.length - 1) {
          const pct = (t - start) / (p.endStep - start);
          lr = this._anneal(g[p.startLr], g[p.endLr], pct);
          if (this.cycleMomentum) mom = this._anneal(g[p.startMomentum], g[p.endMomentum], pct);
          break;
        }
        start = p.endStep;
      }
      if (this.cycleMomentum) {
        if (this.useBeta1) g.betas = [mom, ...(g.betas as number[]).slice(1)];
        else g.momentum = mom;
      }
      return lr;
    });
  }
}

/** Runs `schedulers` one after another, switching at `milestones`. */
export class SequentialLR extends LRScheduler {
  _schedulers: LRScheduler[];
  _milestones: number[];
  constructor(opt: Optimizer, schedulers: LRScheduler[], milestones: number[], lastEpoch = -1) {
    schedulers.forEach((s, i) => {
      if (s.optimizer !== opt)
        throw new Error(
          `Sequential Schedulers expects all schedulers to belong to the same optimizer, but got schedulers at index ${i} to be different than the optimizer passed in.`,
        );
    });
    if (milestones.length !== schedulers.length - 1)
      throw new Error(
        `Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone points, but got number of schedulers ${schedulers.length} and the number of milestones to be equal to ${milestones.length}`,
      );
    super(opt, lastEpoch === -1 ? -1 : lastEpoch);
    this._schedulers = schedulers;
    this._milestones = milestones;
    this.lastEpoch = lastEpoch + 1;
    for (const g of opt.paramGroups) g.lr = g.initialLr;
    for (const s of schedulers) s.lastEpoch -= 1;
    schedulers[0]!["_initialStep"]();
    this._lastLr = schedulers[0]!.getLastLr();
  }
  getLr(): number[] {
    return this._lastLr;
  }
  override step(): void {
    this.lastEpoch++;
    let idx = 0;
    while (idx < this._milestones.length && this._milestones[idx]! <= this.lastEpoch) idx++;
    const s = this._schedulers[idx]!;
    if (idx > 0 && this._milestones[idx - 1] === this.lastEpoch) s.step(0);
    else s.step();
    this._lastLr = s.getLastLr();
  }
  override stateDict(): Record<string, unknown> {
    const sd = super.stateDict();
    sd._schedulers = this._schedulers.map((s) => s.stateDict());
    return sd;
  }
  override loadStateDict(sd: Record<string, unknown>): void {
    const { _schedulers: subs, ...rest } = sd;
    super.loadStateDict(rest);
    (subs as Record<string, unknown>[]).forEach((s, i) => this._schedulers[i]!.loadStateDict(s));
  }
}
