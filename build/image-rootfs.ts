/**
 * The container image's root file system, laid out as distroless images are:
 * the executable, the C library files it and its argon2 binding load (found
 * from their ELF headers, taken from this machine for its own architecture
 * or from Debian's cross packages for the other), CA certificates, time zone
 * data, passwd and group lines for root, nobody and nonroot (65532), an
 * empty /data and /home/nonroot owned by nonroot, and /tmp. Nothing else:
 * no shell, no package manager. Debian 12's merged /usr layout (lib ->
 * usr/lib), so the loader's path in the executable resolves as on Debian.
 */
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, realpathSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import { elfNeeds } from "./elf.ts";

/** The user the image runs as: distroless's nonroot. */
export const NONROOT = 65532;

export type RootfsEntry =
  | { path: string; type: "directory"; mode: number; owner?: number }
  | { path: string; type: "file"; mode: number; bytes: Uint8Array; owner?: number }
  | { path: string; type: "symlink"; target: string };

export type ImageArch = "amd64" | "arm64";

const TRIPLETS: Record<ImageArch, string> = { amd64: "x86_64-linux-gnu", arm64: "aarch64-linux-gnu" };
const NODE_ARCH: Record<ImageArch, string> = { amd64: "x64", arm64: "arm64" };

/** Where this machine keeps an architecture's C library: its own, or a Debian cross package's. */
export function libraryDirs(arch: ImageArch): { dirs: string[]; packages: string } {
  const triplet = TRIPLETS[arch];
  if (process.arch === NODE_ARCH[arch]) return { dirs: [`/lib/${triplet}`, `/usr/lib/${triplet}`], packages: "libc6 libgcc-s1" };
  return { dirs: [`/usr/${triplet}/lib`], packages: `libc6-${arch}-cross libgcc-s1-${arch}-cross` };
}

export const CA_CERTIFICATES = "/etc/ssl/certs/ca-certificates.crt";
export const ZONEINFO = "/usr/share/zoneinfo";

const PASSWD = ["root:x:0:0:root:/root:/sbin/nologin", "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin", `nonroot:x:${NONROOT}:${NONROOT}:nonroot:/home/nonroot:/sbin/nologin`, ""].join("\n");
const GROUP = ["root:x:0:", "nobody:x:65534:", `nonroot:x:${NONROOT}:`, ""].join("\n");
const NSSWITCH = ["passwd: files", "group: files", "hosts: files dns", ""].join("\n");

const text = (s: string) => new TextEncoder().encode(s);

/** The shared libraries `objects` need, and theirs in turn: name -> file on this machine. */
function libraries(objects: Uint8Array[], arch: ImageArch): Map<string, string> {
  const { dirs, packages } = libraryDirs(arch);
  const found = new Map<string, string>();
  const wanted = objects.flatMap((o) => elfNeeds(o).needed);
  while (wanted.length > 0) {
    const name = wanted.shift()!;
    if (found.has(name)) continue;
    const dir = dirs.find((d) => existsSync(join(d, name)));
    if (!dir) throw new Error(`${name} for ${arch} is not in ${dirs.join(" or ")} (Debian's ${packages})`);
    const file = realpathSync(join(dir, name));
    found.set(name, file);
    wanted.push(...elfNeeds(new Uint8Array(readFileSync(file))).needed);
  }
  return found;
}

/** A tree of this machine's, its symbolic links kept as links, in a stable order. */
function tree(from: string, to: string): RootfsEntry[] {
  const out: RootfsEntry[] = [];
  for (const name of readdirSync(from).sort()) {
    const source = join(from, name);
    const path = posix.join(to, name);
    const stat = lstatSync(source);
    if (stat.isSymbolicLink()) out.push({ path, type: "symlink", target: readlinkSync(source) });
    else if (stat.isDirectory()) out.push({ path, type: "directory", mode: 0o755 }, ...tree(source, path));
    else if (stat.isFile()) out.push({ path, type: "file", mode: 0o644, bytes: new Uint8Array(readFileSync(source)) });
  }
  return out;
}

export interface RootfsInput {
  arch: ImageArch;
  /** The linux executable for `arch`. */
  executable: Uint8Array;
  /** The argon2 binding the executable embeds: the libraries it loads must be there too. */
  binding: Uint8Array;
}

/** Every entry of the image's one layer, parents before children, in a stable order. */
export function rootfs(input: RootfsInput): RootfsEntry[] {
  const triplet = TRIPLETS[input.arch];
  const exe = elfNeeds(input.executable);
  if (exe.machine !== NODE_ARCH[input.arch]) throw new Error(`the executable is for ${exe.machine}, not ${input.arch}`);
  if (!exe.interpreter?.startsWith("/lib")) throw new Error(`the executable asks for the loader ${exe.interpreter}, not a glibc one in /lib or /lib64`);
  for (const [file, pkg] of [[CA_CERTIFICATES, "ca-certificates"], [ZONEINFO, "tzdata"]] as const) {
    if (!existsSync(file)) throw new Error(`${file} is missing here (Debian's ${pkg} package)`);
  }

  const entries: RootfsEntry[] = [
    { path: "lib", type: "symlink", target: "usr/lib" },
    { path: "etc/passwd", type: "file", mode: 0o644, bytes: text(PASSWD) },
    { path: "etc/group", type: "file", mode: 0o644, bytes: text(GROUP) },
    { path: "etc/nsswitch.conf", type: "file", mode: 0o644, bytes: text(NSSWITCH) },
    { path: "etc/ssl/certs/ca-certificates.crt", type: "file", mode: 0o644, bytes: new Uint8Array(readFileSync(CA_CERTIFICATES)) },
    { path: "root", type: "directory", mode: 0o700 },
    { path: "home/nonroot", type: "directory", mode: 0o700, owner: NONROOT },
    // as the server makes its data dir when it makes it: its own alone
    { path: "data", type: "directory", mode: 0o700, owner: NONROOT },
    { path: "tmp", type: "directory", mode: 0o1777 },
    { path: "usr/local/bin/burrow", type: "file", mode: 0o755, bytes: input.executable },
    { path: "usr/share/zoneinfo", type: "directory", mode: 0o755 },
    ...tree(ZONEINFO, "usr/share/zoneinfo"),
  ];
  for (const [name, file] of libraries([input.executable, input.binding], input.arch)) {
    entries.push({ path: `usr/lib/${triplet}/${name}`, type: "file", mode: name.startsWith("ld-") ? 0o755 : 0o644, bytes: new Uint8Array(readFileSync(file)) });
  }
  // the loader where the executable looks for it (/lib64/ld-linux-x86-64.so.2, /lib/ld-linux-aarch64.so.1)
  const top = exe.interpreter.split("/")[1]!;
  if (top !== "lib") entries.push({ path: top, type: "symlink", target: `usr/${top}` });
  const loader = `usr${exe.interpreter}`;
  const loaderName = posix.basename(exe.interpreter);
  if (loader !== `usr/lib/${triplet}/${loaderName}`) entries.push({ path: loader, type: "symlink", target: posix.relative(posix.dirname(loader), `usr/lib/${triplet}/${loaderName}`) });
  return withParents(entries);
}

/** Each entry's missing parent directories (root-owned, 0755) added, and everything in path order. */
function withParents(entries: RootfsEntry[]): RootfsEntry[] {
  const byPath = new Map(entries.map((e) => [e.path, e]));
  for (const e of entries) {
    for (let dir = dirname(e.path); dir !== "." && !byPath.has(dir); dir = dirname(dir)) byPath.set(dir, { path: dir, type: "directory", mode: 0o755 });
  }
  // sorted by path component, so a directory comes right before what it holds
  const key = (p: string) => p.split("/");
  return [...byPath.values()].sort((a, b) => {
    const [x, y] = [key(a.path), key(b.path)];
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1;
    return x.length - y.length;
  });
}
