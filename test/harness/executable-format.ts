/**
 * What an executable file is, read from its headers: ELF (machine and
 * program interpreter, which tells glibc from musl), Mach-O (CPU type) or
 * PE (machine). Enough to check a cross-built release file without running it.
 */
export interface ExecutableFormat {
  format: "elf" | "mach-o" | "pe" | "unknown";
  arch?: "x64" | "arm64" | "other";
  /** ELF only: the dynamic loader it asks for, e.g. /lib/ld-musl-x86_64.so.1 */
  interpreter?: string;
}

const ELF_MACHINES: Record<number, "x64" | "arm64"> = { 0x3e: "x64", 0xb7: "arm64" };
const MACHO_CPUS: Record<number, "x64" | "arm64"> = { 0x01000007: "x64", 0x0100000c: "arm64" };
const PE_MACHINES: Record<number, "x64" | "arm64"> = { 0x8664: "x64", 0xaa64: "arm64" };
const PT_INTERP = 3;

export function executableFormat(bytes: Uint8Array): ExecutableFormat {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length >= 64 && view.getUint32(0, false) === 0x7f454c46) return elf(bytes, view);
  if (bytes.length >= 8 && view.getUint32(0, true) === 0xfeedfacf) {
    return { format: "mach-o", arch: MACHO_CPUS[view.getUint32(4, true)] ?? "other" };
  }
  if (bytes.length >= 64 && bytes[0] === 0x4d && bytes[1] === 0x5a) {
    const pe = view.getUint32(0x3c, true);
    if (pe + 6 <= bytes.length && view.getUint32(pe, false) === 0x50450000) {
      return { format: "pe", arch: PE_MACHINES[view.getUint16(pe + 4, true)] ?? "other" };
    }
  }
  return { format: "unknown" };
}

function elf(bytes: Uint8Array, view: DataView): ExecutableFormat {
  // 64-bit little-endian only: every release target is
  const arch = ELF_MACHINES[view.getUint16(18, true)] ?? "other";
  const phoff = Number(view.getBigUint64(32, true));
  const phentsize = view.getUint16(54, true);
  const phnum = view.getUint16(56, true);
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (view.getUint32(at, true) !== PT_INTERP) continue;
    const offset = Number(view.getBigUint64(at + 8, true));
    const size = Number(view.getBigUint64(at + 32, true));
    const interpreter = new TextDecoder().decode(bytes.subarray(offset, offset + size)).replace(/\0+$/, "");
    return { format: "elf", arch, interpreter };
  }
  return { format: "elf", arch };
}

/** Whether `haystack` holds `needle` whole (the first 4 KiB found, then the rest compared). */
export function containsBytes(haystack: Uint8Array, needle: Uint8Array): boolean {
  const buf = Buffer.from(haystack.buffer, haystack.byteOffset, haystack.byteLength);
  const head = Buffer.from(needle.subarray(0, 4096));
  for (let at = buf.indexOf(head); at !== -1; at = buf.indexOf(head, at + 1)) {
    if (Buffer.compare(buf.subarray(at, at + needle.length), needle) === 0) return true;
  }
  return false;
}
