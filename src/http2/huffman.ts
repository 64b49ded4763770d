/**
 * HPACK's Huffman code (RFC 7541 §5.2, Appendix B): strings in header
 * blocks may be sent coded with it, and browsers, curl and nghttp2 code
 * nearly all of them.
 *
 * The code is canonical: each symbol's code follows from the code lengths
 * alone (codes of one length are consecutive, in symbol order, and each
 * length starts where the shorter ones left off, doubled). So the table
 * below is the 257 lengths of Appendix B (256 octets and EOS), and the codes
 * are made from them once, at load; the tests check them against the RFC's
 * examples.
 *
 * Decoding reads four bits at a time through a state table made from the
 * code tree (the states are the tree's 256 inner nodes): one lookup per
 * nibble, no per-bit walk and no allocation. A string is refused when it
 * holds EOS, or when it ends with more than 7 bits of padding or padding
 * that is not all ones (§5.2).
 */

// prettier-ignore
const LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30, // EOS
];
const EOS = 256;

/** Each symbol's code (right-aligned) and its length in bits. */
export const CODE_LENGTHS: readonly number[] = LENGTHS;
export const CODES: readonly number[] = canonicalCodes(LENGTHS);

function canonicalCodes(lengths: number[]): number[] {
  const order = lengths.map((_, symbol) => symbol).sort((a, b) => lengths[a]! - lengths[b]! || a - b);
  const codes = new Array<number>(lengths.length);
  let code = 0;
  let length = lengths[order[0]!]!;
  for (const symbol of order) {
    code *= 2 ** (lengths[symbol]! - length);
    length = lengths[symbol]!;
    codes[symbol] = code++;
  }
  return codes;
}

// -- decoding ----------------------------------------------------------------------------------------

/** For each (state, nibble): the next state, and the symbol completed on the way (-1: none, -2: EOS, an error). */
const NEXT = new Uint8Array(256 * 16);
const EMIT = new Int16Array(256 * 16);
/** A string may end in this state: at the root, or up to 7 one-bits into a code (padding is a prefix of EOS). */
const ACCEPTS = new Uint8Array(256);

buildDecoder();

function buildDecoder(): void {
  // the tree: inner nodes numbered from 0 (the root); a child is an inner node (> 0, the root is no
  // one's child), a leaf, -(symbol + 1), or 0 while not yet made
  const children = new Int32Array(2 * 256);
  const depth = new Uint8Array(256);
  const allOnes = new Uint8Array(256);
  allOnes[0] = 1;
  let nodes = 1;
  for (let symbol = 0; symbol <= EOS; symbol++) {
    const length = LENGTHS[symbol]!;
    const code = CODES[symbol]!;
    let node = 0;
    for (let bit = length - 1; bit > 0; bit--) {
      const b = (code >>> bit) & 1;
      const slot = node * 2 + b;
      if (children[slot] === 0) {
        if (nodes === 256) throw new Error("the Huffman code is not a full tree");
        children[slot] = nodes;
        depth[nodes] = depth[node]! + 1;
        allOnes[nodes] = allOnes[node]! & b;
        nodes++;
      }
      node = children[slot]!;
    }
    children[node * 2 + (code & 1)] = -(symbol + 1);
  }
  if (nodes !== 256) throw new Error(`the Huffman tree has ${nodes} inner nodes, not 256`);
  for (let state = 0; state < 256; state++) {
    ACCEPTS[state] = state === 0 || (allOnes[state] === 1 && depth[state]! <= 7) ? 1 : 0;
    for (let nibble = 0; nibble < 16; nibble++) {
      let node = state;
      let emit = -1;
      for (let bit = 3; bit >= 0; bit--) {
        const child = children[node * 2 + ((nibble >> bit) & 1)]!;
        if (child > 0) {
          node = child;
          continue;
        }
        const symbol = -child - 1;
        node = 0;
        emit = symbol === EOS ? -2 : symbol;
        if (emit === -2) break;
      }
      NEXT[state * 16 + nibble] = node;
      EMIT[state * 16 + nibble] = emit;
    }
  }
}

/** The most octets `length` coded octets can decode to (the shortest code is 5 bits). */
export function decodedBound(length: number): number {
  return Math.ceil((length * 8) / 5);
}

/**
 * Decodes `input[start, end)` into `out` from 0; returns the decoded length,
 * or -1 when the string is not a valid coding (EOS inside, bad padding).
 * `out` must hold decodedBound(end - start) bytes.
 */
export function huffmanDecode(input: Uint8Array, start: number, end: number, out: Uint8Array): number {
  let state = 0;
  let n = 0;
  for (let i = start; i < end; i++) {
    const byte = input[i]!;
    let at = state * 16 + (byte >> 4);
    let emit = EMIT[at]!;
    if (emit !== -1) {
      if (emit === -2) return -1;
      out[n++] = emit;
    }
    state = NEXT[at]!;
    at = state * 16 + (byte & 15);
    emit = EMIT[at]!;
    if (emit !== -1) {
      if (emit === -2) return -1;
      out[n++] = emit;
    }
    state = NEXT[at]!;
  }
  return ACCEPTS[state] === 1 ? n : -1;
}

// -- encoding ----------------------------------------------------------------------------------------

/** The coded length in octets of `text` (its characters' low 8 bits; header values are octets). */
export function huffmanLength(text: string): number {
  let bits = 0;
  for (let i = 0; i < text.length; i++) bits += LENGTHS[text.charCodeAt(i) & 0xff]!;
  return Math.ceil(bits / 8);
}

/** Writes `text` coded into `out` at `at`, padded with ones; returns the offset after it. `out` must have huffmanLength(text) bytes there. */
export function huffmanEncode(text: string, out: Uint8Array, at: number): number {
  // up to 7 bits wait here between symbols; with a 30-bit code that is 37 bits, exact in a double
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < text.length; i++) {
    const symbol = text.charCodeAt(i) & 0xff;
    const length = LENGTHS[symbol]!;
    acc = acc * 2 ** length + CODES[symbol]!;
    bits += length;
    while (bits >= 8) {
      bits -= 8;
      const high = Math.floor(acc / 2 ** bits);
      out[at++] = high & 0xff;
      acc -= high * 2 ** bits;
    }
  }
  if (bits > 0) out[at++] = ((acc << (8 - bits)) | (0xff >> bits)) & 0xff;
  return at;
}
