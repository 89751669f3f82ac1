/** Splitting work into consecutive chunks bounded by count (and bytes): one etcd txn per chunk. */

export function chunks<T>(items: readonly T[], size: number): (readonly T[])[] {
  const out: (readonly T[])[] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Consecutive chunks of at most `count` items and `bytes` of `weight` (an item alone may exceed it). */
export function chunksBy<T>(items: readonly T[], count: number, bytes: number, weight: (item: T) => number): T[][] {
  const out: T[][] = [];
  let chunk: T[] = [];
  let total = 0;
  for (const item of items) {
    const w = weight(item);
    if (chunk.length > 0 && (chunk.length >= count || total + w > bytes)) {
      out.push(chunk);
      chunk = [];
      total = 0;
    }
    chunk.push(item);
    total += w;
  }
  if (chunk.length > 0) out.push(chunk);
  return out;
}
