/**
 * The last few things the screen lists (requests, connections): a fixed
 * ring, so adding one is O(1) and memory stays bounded however busy the
 * tunnel is.
 */
export class Recent<T> {
  private readonly items: (T | undefined)[];
  private added = 0;

  constructor(readonly capacity: number) {
    this.items = new Array(capacity);
  }

  add(item: T): void {
    this.items[this.added % this.capacity] = item;
    this.added++;
  }

  get size(): number {
    return Math.min(this.added, this.capacity);
  }

  /** Up to `n`, the newest first. */
  newest(n: number): T[] {
    const count = Math.min(n, this.size);
    const out: T[] = [];
    for (let i = 1; i <= count; i++) out.push(this.items[(this.added - i) % this.capacity]!);
    return out;
  }
}
