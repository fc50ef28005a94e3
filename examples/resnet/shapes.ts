// A generated image-classification dataset: one coloured shape (circle, square, triangle or
// cross) of random size, position and colour on a random dark background with pixel noise.
// Deterministic from a seed (its own PRNG, so torch's RNG stays free for training).

import { mulberry32 } from "../common/train_utils.js";

export const CLASSES = ["circle", "square", "triangle", "cross"] as const;

function inside(cls: number, dx: number, dy: number, r: number): boolean {
  switch (cls) {
    case 0:
      return dx * dx + dy * dy <= r * r;
    case 1:
      return Math.abs(dx) <= r * 0.8 && Math.abs(dy) <= r * 0.8;
    case 2: // upward triangle: apex at top, base at the bottom
      return dy <= r * 0.8 && dy >= -r && Math.abs(dx) <= ((dy + r) / (1.8 * r)) * r;
    default: {
      const t = r * 0.3;
      return (Math.abs(dx) <= t && Math.abs(dy) <= r) || (Math.abs(dy) <= t && Math.abs(dx) <= r);
    }
  }
}

/** n images [n, 3, size, size] in [0, 1] (NCHW, float32) and labels. */
export function makeShapes(n: number, size: number, seed: number): { images: Float32Array; labels: number[] } {
  const r = mulberry32(seed);
  const images = new Float32Array(n * 3 * size * size);
  const labels: number[] = [];
  const plane = size * size;
  for (let i = 0; i < n; i++) {
    const cls = Math.floor(r() * CLASSES.length);
    labels.push(cls);
    const rad = size * (0.2 + 0.15 * r());
    const cx = rad + r() * (size - 2 * rad);
    const cy = rad + r() * (size - 2 * rad);
    const bg = [0.3 * r(), 0.3 * r(), 0.3 * r()];
    const fg = [0.5 + 0.5 * r(), 0.5 + 0.5 * r(), 0.5 + 0.5 * r()];
    const base = i * 3 * plane;
    for (let y = 0; y < size; y++)
      for (let x = 0; x < size; x++) {
        const on = inside(cls, x + 0.5 - cx, y + 0.5 - cy, rad);
        for (let c = 0; c < 3; c++) {
          const v = (on ? fg[c]! : bg[c]!) + 0.05 * (r() - 0.5);
          images[base + c * plane + y * size + x] = Math.min(1, Math.max(0, v));
        }
      }
  }
  return { images, labels };
}
