/**
 * HPACK's two tables (RFC 7541 §2.3): the static table of 61 common fields,
 * and a dynamic table per direction of a connection, which each side fills
 * as it codes and which is bounded in octets by the decoder's setting.
 * Index 1-61 is the static table, 62 on the dynamic one, newest first.
 */

// prettier-ignore
export const STATIC_TABLE: readonly (readonly [string, string])[] = [
  [":authority", ""], [":method", "GET"], [":method", "POST"], [":path", "/"], [":path", "/index.html"],
  [":scheme", "http"], [":scheme", "https"], [":status", "200"], [":status", "204"], [":status", "206"],
  [":status", "304"], [":status", "400"], [":status", "404"], [":status", "500"], ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"], ["accept-language", ""], ["accept-ranges", ""], ["accept", ""],
  ["access-control-allow-origin", ""], ["age", ""], ["allow", ""], ["authorization", ""], ["cache-control", ""],
  ["content-disposition", ""], ["content-encoding", ""], ["content-language", ""], ["content-length", ""],
  ["content-location", ""], ["content-range", ""], ["content-type", ""], ["cookie", ""], ["date", ""], ["etag", ""],
  ["expect", ""], ["expires", ""], ["from", ""], ["host", ""], ["if-match", ""], ["if-modified-since", ""],
  ["if-none-match", ""], ["if-range", ""], ["if-unmodified-since", ""], ["last-modified", ""], ["link", ""],
  ["location", ""], ["max-forwards", ""], ["proxy-authenticate", ""], ["proxy-authorization", ""], ["range", ""],
  ["referer", ""], ["refresh", ""], ["retry-after", ""], ["server", ""], ["set-cookie", ""],
  ["strict-transport-security", ""], ["transfer-encoding", ""], ["user-agent", ""], ["vary", ""], ["via", ""],
  ["www-authenticate", ""],
];
export const STATIC_LENGTH = STATIC_TABLE.length;

const FIRST_SLOTS = 8;

/** What an entry costs in the table: its octets and 32 (RFC 7541 §4.1); also how SETTINGS_MAX_HEADER_LIST_SIZE counts a field. */
export const ENTRY_OVERHEAD = 32;

/** The static index of each name (its first entry) and of each name with its value, for the encoder. */
export const STATIC_NAME_INDEX: ReadonlyMap<string, number> = new Map(
  STATIC_TABLE.map(([name], i) => [name, i + 1] as const).reverse(),
);
export const STATIC_FIELD_INDEX: ReadonlyMap<string, number> = new Map(
  STATIC_TABLE.filter(([, value]) => value !== "").map(([name, value]) => [`${name}\0${value}`, STATIC_TABLE.findIndex(([n, v]) => n === name && v === value) + 1] as const),
);

/**
 * A dynamic table: a ring of entries, newest at the head, evicting the
 * oldest past its size. Names and values are strings of octets (one
 * character each, latin1), so a string's length is its size in octets.
 */
export class DynamicTable {
  /** The ring: it starts small and grows as entries come, up to what maxSize can hold (an idle connection keeps little). */
  private names: string[] = new Array<string>(FIRST_SLOTS);
  private values: string[] = new Array<string>(FIRST_SLOTS);
  private head = 0;
  /** Entries in the table. */
  count = 0;
  /** Octets the entries take (with their overhead). */
  size = 0;
  /** Entries added since the table began: the n-th (from 0) is at dynamic index added - 1 - n while it is kept. */
  added = 0;

  constructor(public maxSize: number) {}

  /** The entry at dynamic index `i` (0: newest); the caller checks i < count. */
  name(i: number): string {
    return this.names[(this.head + i) % this.names.length]!;
  }
  value(i: number): string {
    return this.values[(this.head + i) % this.values.length]!;
  }

  /** Adds an entry (RFC 7541 §4.4): older ones leave to make room; one larger than the table empties it and is not kept. */
  add(name: string, value: string, onEvict?: (name: string, value: string, number: number) => void): void {
    const size = name.length + value.length + ENTRY_OVERHEAD;
    this.evictTo(this.maxSize - size, onEvict);
    this.added++;
    if (size > this.maxSize) return;
    if (this.count === this.names.length) this.grow();
    this.head = (this.head - 1 + this.names.length) % this.names.length;
    this.names[this.head] = name;
    this.values[this.head] = value;
    this.count++;
    this.size += size;
  }

  /** A new maximum size (a dynamic table size update, or the peer's setting for the encoder's table). */
  resize(maxSize: number, onEvict?: (name: string, value: string, number: number) => void): void {
    this.evictTo(maxSize, onEvict);
    this.maxSize = maxSize;
  }

  /** Twice the slots (an entry takes at least 32 octets, so a table never needs more than maxSize / 32), the ring laid out again. */
  private grow(): void {
    const slots = this.names.length * 2;
    const names = new Array<string>(slots);
    const values = new Array<string>(slots);
    for (let i = 0; i < this.count; i++) {
      names[i] = this.name(i);
      values[i] = this.value(i);
    }
    this.names = names;
    this.values = values;
    this.head = 0;
  }

  private evictTo(room: number, onEvict?: (name: string, value: string, number: number) => void): void {
    while (this.count > 0 && this.size > room) {
      const last = (this.head + this.count - 1) % this.names.length;
      const name = this.names[last]!;
      const value = this.values[last]!;
      this.size -= name.length + value.length + ENTRY_OVERHEAD;
      this.count--;
      onEvict?.(name, value, this.added - this.count - 1);
      this.names[last] = "";
      this.values[last] = "";
    }
    if (this.count === 0) this.size = 0;
  }
}
