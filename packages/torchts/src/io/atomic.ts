// Crash-safe file replacement: write a temporary file in the destination's folder, fsync it,
// rename it over the destination, then fsync the folder so the rename itself is durable.
// A process killed at any point leaves either the old file or the new one, never a mix;
// at worst a stray `<name>.tmp-*` file remains, which readers never open.

export async function atomicWriteFile(path: string, bytes: Uint8Array): Promise<void> {
  const fs = await import("node:fs/promises");
  const { dirname } = await import("node:path");
  const tmp = `${path}.tmp-${process.pid}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  try {
    const fh = await fs.open(tmp, "w");
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fs.rename(tmp, path);
  } catch (e) {
    await fs.rm(tmp, { force: true }).catch(() => undefined);
    throw e;
  }
  // Directory fsync is not supported everywhere (e.g. Windows); the data itself is already synced.
  try {
    const d = await fs.open(dirname(path), "r");
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  } catch {
    /* best effort */
  }
}
