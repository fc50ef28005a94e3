// The block hashes of a prompt's token ids as the replicas name them in their KV events: torchts serve's
// chained sha256 (HostKVTier.keys from @torchts/serve's public exports). Loaded only when the precise
// scorer is configured, since @torchts/serve brings torchts with it.
export type KeysFn = (salt: string, tokens: readonly number[], blockSize: number) => string[];

export async function hostKeys(): Promise<KeysFn> {
  const { HostKVTier } = await import("@torchts/serve");
  return (salt, tokens, blockSize) => HostKVTier.keys(salt, tokens, blockSize);
}

/** For configurations without the precise scorer: no token blocks. */
export const noKeys: KeysFn = () => [];
