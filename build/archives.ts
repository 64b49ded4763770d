/**
 * The compressed archive of one executable: .tar.gz (mode 0755 kept) for
 * Linux and macOS, .zip for Windows. Owner, times and order are fixed (the
 * commit's date), so the same executable always gives the same archive.
 */
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { zipSync } from "fflate";
import { pack } from "tar-stream";

export async function tarGz(name: string, bytes: Uint8Array, mtime: Date): Promise<Uint8Array> {
  const tar = pack();
  tar.entry({ name, size: bytes.length, mode: 0o755, mtime, uid: 0, gid: 0, uname: "root", gname: "root" }, Buffer.from(bytes));
  tar.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of tar) chunks.push(chunk as Buffer);
  // node's gzip writes no name and a zero time into its header; off the main thread, so
  // another target compiles meanwhile
  return new Uint8Array(await promisify(gzip)(Buffer.concat(chunks), { level: 9 }));
}

export function zip(name: string, bytes: Uint8Array, mtime: Date): Uint8Array {
  return zipSync({ [name]: [bytes, { level: 9, mtime, os: 3, attrs: (0o100755 << 16) >>> 0 }] });
}
