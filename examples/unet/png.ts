// A minimal PNG writer (8-bit grayscale, no interlace) on node:zlib.
import { deflateSync } from "node:zlib";

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, data.length);
  out.set(new TextEncoder().encode(type), 4);
  out.set(data, 8);
  dv.setUint32(8 + data.length, crc32(out.subarray(4, 8 + data.length)));
  return out;
}

/** Encode gray pixels (row-major, 0..255) of a width x height image. */
export function encodeGrayPng(pixels: Uint8Array, width: number, height: number): Uint8Array {
  const ihdr = new Uint8Array(13);
  const dv = new DataView(ihdr.buffer);
  dv.setUint32(0, width);
  dv.setUint32(4, height);
  ihdr.set([8, 0, 0, 0, 0], 8); // bit depth 8, grayscale, deflate, adaptive filter, no interlace
  const raw = new Uint8Array(height * (width + 1));
  for (let y = 0; y < height; y++) raw.set(pixels.subarray(y * width, (y + 1) * width), y * (width + 1) + 1); // filter 0
  const sig = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]);
  const parts = [sig, chunk("IHDR", ihdr), chunk("IDAT", deflateSync(raw)), chunk("IEND", new Uint8Array(0))];
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Tile n single-channel images (values in [-1, 1], [n, h, w] flattened) into a grid PNG with 1px gaps, scaled up. */
export function gridPng(images: ArrayLike<number>, n: number, h: number, w: number, cols: number, scale = 2): Uint8Array {
  const rows = Math.ceil(n / cols);
  const W = cols * (w * scale + 1) + 1;
  const H = rows * (h * scale + 1) + 1;
  const px = new Uint8Array(W * H).fill(128);
  for (let i = 0; i < n; i++) {
    const oy = 1 + Math.floor(i / cols) * (h * scale + 1);
    const ox = 1 + (i % cols) * (w * scale + 1);
    for (let y = 0; y < h * scale; y++)
      for (let x = 0; x < w * scale; x++) {
        const v = images[i * h * w + Math.floor(y / scale) * w + Math.floor(x / scale)]!;
        px[(oy + y) * W + ox + x] = Math.round(Math.min(1, Math.max(-1, v)) * 127.5 + 127.5);
      }
  }
  return encodeGrayPng(px, W, H);
}
