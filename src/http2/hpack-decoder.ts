/**
 * HPACK decoding (RFC 7541 §6): one connection's header blocks, each read
 * whole, into fields handed to a sink as they are read.
 *
 * The decoded list is bounded while it is decoded, not after: each field's
 * size (name, value and 32 octets, as SETTINGS_MAX_HEADER_LIST_SIZE counts
 * it) is added before the field is made, and past the bound no more fields
 * are made: the rest of the block is only read for what it does to the
 * dynamic table, which must stay in step with the peer's for the next
 * block. So a small block that names a large table entry thousands of
 * times (an HPACK bomb) costs the reading of its bytes, never the list it
 * would decode to. A block that does not decode is a COMPRESSION_ERROR for
 * the whole connection (the tables are out of step from there on).
 */
import { DEFAULT_HEADER_TABLE_SIZE, ConnectionError, ErrorCode } from "./wire.ts";
import { DynamicTable, ENTRY_OVERHEAD, STATIC_LENGTH, STATIC_TABLE } from "./hpack-tables.ts";
import { decodedBound, huffmanDecode } from "./huffman.ts";

/** Who takes a block's fields: names and values as strings of octets (latin1), in order. */
export interface FieldSink {
  field(name: string, value: string): void;
}

/** The largest integer a block may carry (lengths, indexes, sizes): 2^31 - 1 is more than any block holds. */
const MAX_INTEGER = 2 ** 31 - 1;
const EMPTY = new Uint8Array(0);

/** Where Huffman-coded strings are decoded: shared (decoding never overlaps), grown to the longest string seen. */
let huffmanOut = Buffer.alloc(1024);

function compressionError(why: string): ConnectionError {
  return new ConnectionError(ErrorCode.COMPRESSION_ERROR, `header block: ${why}`);
}

export class HpackDecoder {
  private readonly table: DynamicTable;
  /** The block being read, as bytes and as a Buffer for latin1 strings, and where. */
  private buf: Uint8Array = EMPTY;
  private view: Buffer | undefined;
  private pos = 0;
  private end = 0;
  /** The entry lookup() found. */
  private entryName = "";
  private entryValue = "";

  /** `maxTableSize`: what this side's SETTINGS_HEADER_TABLE_SIZE allows the peer's table size updates. */
  constructor(private readonly maxTableSize = DEFAULT_HEADER_TABLE_SIZE) {
    this.table = new DynamicTable(maxTableSize);
  }

  /**
   * Decodes one whole block, handing each field to `sink` while the list
   * is within `maxListSize`. Returns false when it was not: the fields
   * past the bound were read but not made (nor handed on). Throws a
   * COMPRESSION_ERROR ConnectionError when the block does not decode.
   */
  decode(block: Uint8Array, maxListSize: number, sink: FieldSink): boolean {
    this.buf = block;
    this.view = undefined;
    this.pos = 0;
    this.end = block.byteLength;
    let listSize = 0;
    let within = true;
    let fieldsSeen = false;
    try {
      while (this.pos < this.end) {
        const first = block[this.pos]!;
        if (first & 0x80) {
          // indexed field (§6.1)
          const index = this.integer(0x7f);
          fieldsSeen = true;
          this.lookup(index);
          if (!within) continue;
          listSize += this.entryName.length + this.entryValue.length + ENTRY_OVERHEAD;
          if (listSize > maxListSize) within = false;
          else sink.field(this.entryName, this.entryValue);
          continue;
        }
        if ((first & 0xe0) === 0x20) {
          // dynamic table size update (§6.3): only before the block's first field (§4.2)
          if (fieldsSeen) throw compressionError("a table size update after a field");
          const size = this.integer(0x1f);
          if (size > this.maxTableSize) throw compressionError(`a table size update to ${size}, past the ${this.maxTableSize} allowed`);
          this.table.resize(size);
          continue;
        }
        // a literal (§6.2): with incremental indexing (01), without (0000), never indexed (0001)
        const indexed = (first & 0xc0) === 0x40;
        const index = this.integer(indexed ? 0x3f : 0x0f);
        fieldsSeen = true;
        // past the bound, a literal is decoded only when the table keeps it
        const wanted = within || indexed;
        let name = "";
        if (index === 0) name = wanted ? this.string() : this.skipString();
        else {
          this.lookup(index);
          name = this.entryName;
        }
        const value = wanted ? this.string() : this.skipString();
        if (indexed) this.table.add(name, value);
        if (!within) continue;
        listSize += name.length + value.length + ENTRY_OVERHEAD;
        if (listSize > maxListSize) within = false;
        else sink.field(name, value);
      }
    } finally {
      this.buf = EMPTY;
      this.view = undefined;
      this.entryName = this.entryValue = "";
    }
    return within;
  }

  /** An integer with an N-bit prefix (§5.1), the prefix's mask given. */
  private integer(mask: number): number {
    let value = this.buf[this.pos++]! & mask;
    if (value < mask) return value;
    let factor = 1;
    for (;;) {
      if (this.pos >= this.end) throw compressionError("an integer runs past the block");
      const byte = this.buf[this.pos++]!;
      value += (byte & 0x7f) * factor;
      if ((byte & 0x80) === 0) break;
      factor *= 128;
      if (factor > 2 ** 28) throw compressionError("an integer longer than 5 octets");
    }
    if (value > MAX_INTEGER) throw compressionError("an integer past 2^31");
    return value;
  }

  /** Sets entryName and entryValue to the entry at `index` (§2.3.3). */
  private lookup(index: number): void {
    if (index === 0) throw compressionError("index 0");
    if (index <= STATIC_LENGTH) {
      const entry = STATIC_TABLE[index - 1]!;
      this.entryName = entry[0];
      this.entryValue = entry[1];
      return;
    }
    const i = index - STATIC_LENGTH - 1;
    if (i >= this.table.count) throw compressionError(`index ${index} is past the table`);
    this.entryName = this.table.name(i);
    this.entryValue = this.table.value(i);
  }

  /** The length of the string literal at pos (§5.2), checked against the block; pos is left at its first octet. */
  private stringLength(): number {
    if (this.pos >= this.end) throw compressionError("a string literal runs past the block");
    const length = this.integer(0x7f);
    if (length > this.end - this.pos) throw compressionError("a string literal runs past the block");
    return length;
  }

  private string(): string {
    const huffman = (this.buf[this.pos]! & 0x80) !== 0;
    const length = this.stringLength();
    const start = this.pos;
    this.pos += length;
    if (!huffman) {
      this.view ??= Buffer.from(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
      return this.view.toString("latin1", start, this.pos);
    }
    const bound = decodedBound(length);
    if (bound > huffmanOut.byteLength) huffmanOut = Buffer.alloc(Math.max(bound, huffmanOut.byteLength * 2));
    const n = huffmanDecode(this.buf, start, this.pos, huffmanOut);
    if (n < 0) throw compressionError("a Huffman-coded string is malformed");
    return huffmanOut.toString("latin1", 0, n);
  }

  private skipString(): string {
    const length = this.stringLength(); // moves pos past the length's own octets first
    this.pos += length;
    return "";
  }
}
