/**
 * What a 64-bit little-endian ELF file asks of the dynamic loader: its
 * program interpreter (PT_INTERP) and the shared libraries it needs
 * (DT_NEEDED), read from the headers without running it, so that an arm64
 * executable is read as well as this machine's (ldd runs the file).
 */

export interface ElfNeeds {
  machine: "x64" | "arm64" | "other";
  /** The loader it names, e.g. /lib64/ld-linux-x86-64.so.2; undefined for a shared library. */
  interpreter?: string;
  /** DT_NEEDED's names, in the file's order: libc.so.6, libm.so.6 ... */
  needed: string[];
}

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;
const MACHINES: Record<number, "x64" | "arm64"> = { 0x3e: "x64", 0xb7: "arm64" };

export function elfNeeds(bytes: Uint8Array): ElfNeeds {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 64 || view.getUint32(0, false) !== 0x7f454c46) throw new Error("not an ELF file");
  if (bytes[4] !== 2 || bytes[5] !== 1) throw new Error("not a 64-bit little-endian ELF file");
  const machine = MACHINES[view.getUint16(18, true)] ?? "other";
  const phoff = Number(view.getBigUint64(32, true));
  const phentsize = view.getUint16(54, true);
  const phnum = view.getUint16(56, true);
  const segments = Array.from({ length: phnum }, (_, i) => {
    const at = phoff + i * phentsize;
    return {
      type: view.getUint32(at, true),
      offset: Number(view.getBigUint64(at + 8, true)),
      vaddr: view.getBigUint64(at + 16, true),
      filesz: Number(view.getBigUint64(at + 32, true)),
    };
  });
  const text = (from: number, end: number) => new TextDecoder().decode(bytes.subarray(from, end));

  const interp = segments.find((s) => s.type === PT_INTERP);
  const interpreter = interp ? text(interp.offset, interp.offset + interp.filesz).replace(/\0+$/, "") : undefined;

  const dynamic = segments.find((s) => s.type === PT_DYNAMIC);
  if (!dynamic) return { machine, interpreter, needed: [] };
  const offsets: bigint[] = [];
  let strtab: bigint | undefined;
  for (let at = dynamic.offset; at + 16 <= dynamic.offset + dynamic.filesz; at += 16) {
    const tag = view.getBigInt64(at, true);
    if (tag === DT_NULL) break;
    const value = view.getBigUint64(at + 8, true);
    if (tag === DT_NEEDED) offsets.push(value);
    else if (tag === DT_STRTAB) strtab = value;
  }
  if (offsets.length === 0) return { machine, interpreter, needed: [] };
  if (strtab === undefined) throw new Error("DT_NEEDED without DT_STRTAB");
  // DT_STRTAB is an address in memory: the loaded segment that holds it says where it is in the file
  const load = segments.find((s) => s.type === PT_LOAD && strtab! >= s.vaddr && strtab! < s.vaddr + BigInt(s.filesz));
  if (!load) throw new Error("DT_STRTAB outside every loaded segment");
  const table = load.offset + Number(strtab - load.vaddr);
  const needed = offsets.map((o) => {
    const from = table + Number(o);
    const end = bytes.indexOf(0, from);
    if (end < 0) throw new Error("an unterminated DT_NEEDED name");
    return text(from, end);
  });
  return { machine, interpreter, needed };
}
