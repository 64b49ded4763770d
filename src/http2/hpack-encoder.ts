/**
 * HPACK encoding (RFC 7541 §6) of one connection's response header blocks.
 *
 * A field the static table holds whole is one index; one sent before on
 * the connection and still in the dynamic table too (a service's
 * content-type, server, cache-control on every response). Anything else is
 * a literal, its name indexed when a table has it, added to the dynamic
 * table for next time; set-cookie is never indexed (a secret should not
 * sit in a table whose hits an observer of sizes could probe, and
 * intermediaries are told the same). A string is Huffman-coded when that
 * is shorter. The table is at most 4,096 octets, less when the client's
 * SETTINGS_HEADER_TABLE_SIZE says less, and a change is announced at the
 * start of the next block (§4.2).
 */
import { DynamicTable, ENTRY_OVERHEAD, STATIC_FIELD_INDEX, STATIC_LENGTH, STATIC_NAME_INDEX } from "./hpack-tables.ts";
import { huffmanEncode, huffmanLength } from "./huffman.ts";
import { DEFAULT_HEADER_TABLE_SIZE } from "./wire.ts";

/** Fields never put in a table. */
const NEVER_INDEXED: ReadonlySet<string> = new Set(["set-cookie", "authorization", "proxy-authorization", "cookie"]);
const STATUS_INDEX = STATIC_NAME_INDEX.get(":status")!;
/**
 * Where blocks are coded: shared by every connection's encoder (a block is
 * copied into its connection's frames before the next is coded), grown to
 * the largest block made.
 */
let shared = new Uint8Array(1024);

export class HpackEncoder {
  private readonly table = new DynamicTable(DEFAULT_HEADER_TABLE_SIZE);
  /** Entries of the dynamic table by "name\0value": their number (DynamicTable.added). */
  private readonly numbers = new Map<string, number>();
  /** A size change to announce at the next block's start: the smallest the size went to, and where it ended. */
  private lowestSize: number | undefined;
  private out = shared;
  private at = 0;
  private readonly forget = (name: string, value: string, number: number): void => {
    const key = `${name}\0${value}`;
    if (this.numbers.get(key) === number) this.numbers.delete(key);
  };

  /** The client's SETTINGS_HEADER_TABLE_SIZE: the table this side codes with is at most that. */
  setPeerTableSize(size: number): void {
    const next = Math.min(size, DEFAULT_HEADER_TABLE_SIZE);
    if (next === this.table.maxSize && this.lowestSize === undefined) return;
    this.lowestSize = Math.min(this.lowestSize ?? next, next);
    this.table.resize(next, this.forget);
  }

  /**
   * A block of `status` (as :status, when given) and `fields` (names are
   * sent lower-cased). The bytes are valid until the next block is coded
   * (by any connection).
   */
  encode(status: number | undefined, fields: readonly (readonly [string, string])[]): Uint8Array {
    this.out = shared;
    this.at = 0;
    if (this.lowestSize !== undefined) {
      this.reserve(12);
      if (this.lowestSize < this.table.maxSize) this.integer(0x20, 0x1f, this.lowestSize);
      this.integer(0x20, 0x1f, this.table.maxSize);
      this.lowestSize = undefined;
    }
    if (status !== undefined) this.field(":status", String(status), STATUS_INDEX);
    for (const [name, value] of fields) {
      const lower = name.toLowerCase();
      this.field(lower, value, STATIC_NAME_INDEX.get(lower) ?? 0);
    }
    return this.out.subarray(0, this.at);
  }

  private field(name: string, value: string, nameIndex: number): void {
    this.reserve(name.length + value.length + 12);
    const key = `${name}\0${value}`;
    const whole = STATIC_FIELD_INDEX.get(key);
    if (whole !== undefined) return this.integer(0x80, 0x7f, whole);
    const number = this.numbers.get(key);
    if (number !== undefined) return this.integer(0x80, 0x7f, STATIC_LENGTH + this.table.added - number);
    const size = name.length + value.length + ENTRY_OVERHEAD;
    if (NEVER_INDEXED.has(name)) this.integer(0x10, 0x0f, nameIndex);
    else if (size > this.table.maxSize / 2) this.integer(0x00, 0x0f, nameIndex);
    else {
      this.integer(0x40, 0x3f, nameIndex);
      this.table.add(name, value, this.forget);
      this.numbers.set(key, this.table.added - 1);
    }
    if (nameIndex === 0) this.string(name);
    this.string(value);
  }

  /** An integer with an N-bit prefix (§5.1): `flags` in the first octet's high bits, `mask` its prefix. */
  private integer(flags: number, mask: number, value: number): void {
    const out = this.out;
    if (value < mask) {
      out[this.at++] = flags | value;
      return;
    }
    out[this.at++] = flags | mask;
    value -= mask;
    while (value >= 128) {
      out[this.at++] = (value % 128) | 0x80;
      value = Math.floor(value / 128);
    }
    out[this.at++] = value;
  }

  private string(text: string): void {
    const coded = huffmanLength(text);
    if (coded < text.length) {
      this.integer(0x80, 0x7f, coded);
      this.at = huffmanEncode(text, this.out, this.at);
      return;
    }
    this.integer(0x00, 0x7f, text.length);
    const out = this.out;
    for (let i = 0; i < text.length; i++) out[this.at++] = text.charCodeAt(i) & 0xff;
  }

  private reserve(n: number): void {
    if (this.at + n <= this.out.byteLength) return;
    const grown = new Uint8Array(Math.max(this.out.byteLength * 2, this.at + n));
    grown.set(this.out.subarray(0, this.at));
    this.out = shared = grown;
  }
}
