// A minimal WebAssembly binary emitter: enough of the MVM + SIMD encoding to write the cpu
// kernels at run time in TypeScript (no C toolchain; the same bytes run in browsers).
// Every module imports one shared memory ("env", "memory") so workers can run its functions.

export const I32 = 0x7f;
export const F32 = 0x7d;
export const V128 = 0x7b;
export type ValType = typeof I32 | typeof F32 | typeof V128;

function uleb(out: number[], v: number): void {
  do {
    let b = v & 0x7f;
    v >>>= 7;
    if (v !== 0) b |= 0x80;
    out.push(b);
  } while (v !== 0);
}

function sleb(out: number[], v: number): void {
  for (;;) {
    const b = v & 0x7f;
    v >>= 7;
    if ((v === 0 && (b & 0x40) === 0) || (v === -1 && (b & 0x40) !== 0)) {
      out.push(b);
      return;
    }
    out.push(b | 0x80);
  }
}

function str(out: number[], s: string): void {
  uleb(out, s.length);
  for (let i = 0; i < s.length; i++) out.push(s.charCodeAt(i));
}

/** Builds one function body. Locals are numbered after the params; `local()` adds one. */
export class Fn {
  readonly code: number[] = [];
  private readonly locals: ValType[] = [];
  constructor(
    readonly name: string,
    readonly params: ValType[],
    readonly results: ValType[] = [],
  ) {}
  local(t: ValType): number {
    this.locals.push(t);
    return this.params.length + this.locals.length - 1;
  }
  op(...bytes: number[]): this {
    this.code.push(...bytes);
    return this;
  }
  get(i: number): this {
    return this.op(0x20, ...u(i));
  }
  set(i: number): this {
    return this.op(0x21, ...u(i));
  }
  tee(i: number): this {
    return this.op(0x22, ...u(i));
  }
  i32(v: number): this {
    this.code.push(0x41);
    sleb(this.code, v | 0);
    return this;
  }
  f32(v: number): this {
    this.code.push(0x43);
    const b = new Uint8Array(new Float32Array([v]).buffer);
    this.code.push(...b);
    return this;
  }
  /** A SIMD opcode (0xfd prefix) with an optional memarg. */
  simd(opc: number, mem?: { align: number; offset: number }): this {
    this.code.push(0xfd, ...u(opc));
    if (mem) this.code.push(...u(mem.align), ...u(mem.offset));
    return this;
  }
  /** Memory op (load/store) with natural alignment hint and a constant byte offset. */
  mem(opc: number, align: number, offset = 0): this {
    return this.op(opc, ...u(align), ...u(offset));
  }
  v128load(offset = 0): this {
    return this.simd(0x00, { align: 4, offset });
  }
  v128store(offset = 0): this {
    return this.simd(0x0b, { align: 4, offset });
  }
  f32splatLoad(offset = 0): this {
    return this.simd(0x09, { align: 2, offset }); // v128.load32_splat
  }
  f32x4splat(): this {
    return this.simd(0x13);
  }
  /** v128.const with all four f32 lanes = v. */
  f32x4(v: number): this {
    this.code.push(0xfd, 0x0c);
    const b = new Uint8Array(new Float32Array([v, v, v, v]).buffer);
    this.code.push(...b);
    return this;
  }
  i32x4(v: number): this {
    this.code.push(0xfd, 0x0c);
    const b = new Uint8Array(new Int32Array([v, v, v, v]).buffer);
    this.code.push(...b);
    return this;
  }
  lane(i: number): this {
    return this.op(0xfd, 0x1f, i); // f32x4.extract_lane
  }
  /** for (; p < end; p += step) body — a loop that may run zero times. */
  forLt(p: number, end: number, step: number, body: () => void): this {
    this.op(0x02, 0x40); // block
    this.get(p).get(end).op(OP.i32geu).op(OP.brIf, 0);
    this.op(0x03, 0x40); // loop
    body();
    this.get(p).i32(step).op(OP.i32add).tee(p).get(end).op(OP.i32ltu).op(OP.brIf, 0);
    return this.op(0x0b, 0x0b);
  }
  /** `block { loop { body } }`: `br 1` leaves, `br 0` continues. */
  loop(body: () => void): this {
    this.op(0x02, 0x40, 0x03, 0x40);
    body();
    return this.op(0x0b, 0x0b);
  }
  encode(): number[] {
    const out: number[] = [];
    const groups: [number, ValType][] = [];
    for (const t of this.locals) {
      const last = groups[groups.length - 1];
      if (last && last[1] === t) last[0]++;
      else groups.push([1, t]);
    }
    uleb(out, groups.length);
    for (const [n, t] of groups) {
      uleb(out, n);
      out.push(t);
    }
    out.push(...this.code, 0x0b);
    const sized: number[] = [];
    uleb(sized, out.length);
    return sized.concat(out);
  }
}

function u(v: number): number[] {
  const o: number[] = [];
  uleb(o, v);
  return o;
}

// Opcodes used by the kernels (names follow the spec's text format).
export const OP = {
  i32add: 0x6a, i32sub: 0x6b, i32mul: 0x6c, i32shl: 0x74, i32ltu: 0x49, i32lts: 0x48, i32ges: 0x4e, i32eqz: 0x45,
  i32geu: 0x4f, i32load: 0x28, i32and: 0x71, i32eq: 0x46,
  f32load: 0x2a, f32store: 0x38, f32add: 0x92, f32sub: 0x93, f32mul: 0x94, f32div: 0x95, f32max: 0x97,
  br: 0x0c, brIf: 0x0d, call: 0x10, drop: 0x1a, select: 0x1b, if: 0x04, else: 0x05, end: 0x0b, ret: 0x0f,
} as const;

// SIMD opcodes (after the 0xfd prefix).
export const SIMD = {
  f32x4add: 0xe4, f32x4sub: 0xe5, f32x4mul: 0xe6, f32x4div: 0xe7, f32x4min: 0xe8, f32x4max: 0xe9,
  f32x4pmin: 0xea, f32x4pmax: 0xeb, f32x4abs: 0xe0, f32x4neg: 0xe1, f32x4sqrt: 0xe3,
  f32x4floor: 0x68, f32x4nearest: 0x6a, f32x4le: 0x45, f32x4splat: 0x13, i32x4splat: 0x11,
  i32x4truncSatF32x4S: 0xf8, f32x4convertI32x4S: 0xfa, i32x4add: 0xae, i32x4shl: 0xab, i32x4shrS: 0xac,
  v128and: 0x4e, v128or: 0x50, v128xor: 0x51, v128bitselect: 0x52, f32x4lt: 0x43, f32x4gt: 0x44, f32x4ge: 0x46,
  f32x4extractLane: 0x1f, i32x4min_s: 0xb6, i32x4max_s: 0xb8,
  relaxedMadd: 0x105,
} as const;

/** Encodes a module that imports a shared memory and exports the given functions. */
export function emitModule(fns: Fn[], memPages: { initial: number; maximum: number }): Uint8Array {
  const out: number[] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
  const section = (id: number, body: number[]) => {
    out.push(id);
    uleb(out, body.length);
    out.push(...body);
  };
  // types: one per function (duplicates are allowed)
  const types: number[] = [];
  uleb(types, fns.length);
  for (const f of fns) {
    types.push(0x60);
    uleb(types, f.params.length);
    types.push(...f.params);
    uleb(types, f.results.length);
    types.push(...f.results);
  }
  section(1, types);
  const imp: number[] = [];
  uleb(imp, 1);
  str(imp, "env");
  str(imp, "memory");
  imp.push(0x02, 0x03); // memory, shared with maximum
  uleb(imp, memPages.initial);
  uleb(imp, memPages.maximum);
  section(2, imp);
  const funcs: number[] = [];
  uleb(funcs, fns.length);
  fns.forEach((_, i) => uleb(funcs, i));
  section(3, funcs);
  const exp: number[] = [];
  uleb(exp, fns.length);
  fns.forEach((f, i) => {
    str(exp, f.name);
    exp.push(0x00);
    uleb(exp, i);
  });
  section(7, exp);
  const code: number[] = [];
  uleb(code, fns.length);
  for (const f of fns) code.push(...f.encode());
  section(10, code);
  return new Uint8Array(out);
}
