// The wire format of PyTorch 1.13's TCPStore (c10d), as observed between Debian's python3-torch
// client and server (test/distributed/store_interop.test.ts checks both directions):
// - a request is a 1-byte query type followed by its arguments;
// - a string or byte vector is a uint64 length and the bytes; integers are 64-bit; all little-endian
//   (the host order of the machines PyTorch runs on);
// - SET has no reply; GET replies a vector; ADD an int64 (the value is stored as its decimal text);
//   COMPARE_SET a vector; CHECK and WAIT take a uint64 count of keys and reply one byte;
//   GETNUMKEYS and DELETE_KEY reply an int64;
// - user keys carry a "/" prefix; a client constructed with a world size first does ADD("init/", 1)
//   (no prefix), and the master polls that key until every worker has joined;
// - `get` is WAIT([key]) then GET(key); a wait that times out is only given up by the client.
// PyTorch 2.x starts every connection with VALIDATE (type 0, then the uint32 0x3C85F7CE) and renumbers
// the queries; the server recognizes such a client and says why it cannot serve it.

export const Query = {
  SET: 0,
  COMPARE_SET: 1,
  GET: 2,
  ADD: 3,
  CHECK: 4,
  WAIT: 5,
  GETNUMKEYS: 6,
  WATCH_KEY: 7,
  DELETE_KEY: 8,
} as const;

export const CHECK_READY = 0;
export const CHECK_NOT_READY = 1;
export const STOP_WAITING = 0;

/** The key a client with a world size adds 1 to when it connects (PyTorch's initKey_). */
export const INIT_KEY = "init/";
/** Prefix of every user key (PyTorch's keyPrefix_). */
export const KEY_PREFIX = "/";

/** PyTorch >= 2.0's first bytes on a connection: VALIDATE, then this uint32. */
export const V2_VALIDATION_MAGIC = 0x3c85f7ce;

/** Builds one request. */
export class Request {
  private parts: Buffer[] = [];
  constructor(type: number) {
    this.parts.push(Buffer.from([type]));
  }
  u64(n: number): this {
    const b = Buffer.allocUnsafe(8);
    b.writeBigUInt64LE(BigInt(n));
    this.parts.push(b);
    return this;
  }
  i64(n: bigint): this {
    const b = Buffer.allocUnsafe(8);
    b.writeBigInt64LE(n);
    this.parts.push(b);
    return this;
  }
  bytes(v: Uint8Array): this {
    this.u64(v.length);
    this.parts.push(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
    return this;
  }
  keys(ks: readonly Uint8Array[]): this {
    this.u64(ks.length);
    for (const k of ks) this.bytes(k);
    return this;
  }
  build(): Buffer {
    return Buffer.concat(this.parts);
  }
}

export function encodeU8(v: number): Buffer {
  return Buffer.from([v]);
}
export function encodeI64(v: bigint): Buffer {
  const b = Buffer.allocUnsafe(8);
  b.writeBigInt64LE(v);
  return b;
}
export function encodeBytes(v: Uint8Array): Buffer {
  const b = Buffer.allocUnsafe(8 + v.length);
  b.writeBigUInt64LE(BigInt(v.length));
  b.set(v, 8);
  return b;
}
