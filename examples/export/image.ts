// The demo's image: a procedural scene drawn on a canvas (sky, sun, hills, a house), so the page
// needs no image file; its pixels become ResNet's input with torchvision's ImageNet normalization.
export const SIZE = 64;

/** xorshift: the scene's layout from the seed */
function rng(seed: number): () => number {
  let s = (seed * 2654435761) >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
}

export function drawImage(canvas: HTMLCanvasElement, seed: number): void {
  const r = rng(seed);
  const g = canvas.getContext("2d")!;
  const k = canvas.width / SIZE;
  g.setTransform(k, 0, 0, k, 0, 0);
  const sky = g.createLinearGradient(0, 0, 0, SIZE);
  sky.addColorStop(0, `hsl(${200 + 30 * r()}, 70%, ${55 + 20 * r()}%)`);
  sky.addColorStop(1, "hsl(40, 60%, 85%)");
  g.fillStyle = sky;
  g.fillRect(0, 0, SIZE, SIZE);
  g.fillStyle = "hsl(50, 95%, 60%)";
  g.beginPath();
  g.arc(10 + 44 * r(), 8 + 14 * r(), 4 + 4 * r(), 0, 2 * Math.PI);
  g.fill();
  for (let i = 0; i < 3; i++) {
    g.fillStyle = `hsl(${90 + 40 * r()}, 45%, ${25 + 15 * i}%)`;
    g.beginPath();
    g.ellipse(SIZE * r(), SIZE + 6, 20 + 20 * r(), 18 + 12 * r(), 0, 0, 2 * Math.PI);
    g.fill();
  }
  const x = 12 + 26 * r();
  g.fillStyle = `hsl(${360 * r()}, 50%, 50%)`;
  g.fillRect(x, 38, 16, 14);
  g.fillStyle = "hsl(10, 60%, 35%)";
  g.beginPath();
  g.moveTo(x - 2, 38);
  g.lineTo(x + 8, 29);
  g.lineTo(x + 18, 38);
  g.fill();
}

/** RGBA pixels -> float32 NCHW [1, 3, SIZE, SIZE], normalized as torchvision's ImageNet models expect. */
export function toInput(img: ImageData): Float32Array {
  const mean = [0.485, 0.456, 0.406];
  const std = [0.229, 0.224, 0.225];
  const out = new Float32Array(3 * SIZE * SIZE);
  for (let c = 0; c < 3; c++)
    for (let i = 0; i < SIZE * SIZE; i++) out[c * SIZE * SIZE + i] = (img.data[4 * i + c]! / 255 - mean[c]!) / std[c]!;
  return out;
}
