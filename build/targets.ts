/**
 * The platforms a release is built for: Bun's compile target, and the
 * @node-rs/argon2 package that holds the native binding for that platform.
 * The names are the release's file names (burrow-<version>-<name>[.exe]).
 */
export interface ReleaseTarget {
  /** os-arch[-musl], as in the file name and SHA256SUMS */
  name: string;
  os: "linux" | "darwin" | "windows";
  arch: "x64" | "arm64";
  /**
   * x64 builds are Bun's "baseline" (no AVX2): many VPS's virtual CPUs do not
   * offer AVX2, and a binary that dies with "Illegal instruction" on one of
   * them is worse than a few percent of speed; install.sh cannot tell which
   * to pick.
   */
  bunTarget: Bun.Build.CompileTarget;
  /** the npm package with argon2.<platform>.node, from argon2's optionalDependencies */
  bindingPackage: string;
  exe: boolean;
}

export const RELEASE_TARGETS: readonly ReleaseTarget[] = [
  { name: "linux-x64", os: "linux", arch: "x64", bunTarget: "bun-linux-x64-baseline", bindingPackage: "@node-rs/argon2-linux-x64-gnu", exe: false },
  { name: "linux-arm64", os: "linux", arch: "arm64", bunTarget: "bun-linux-arm64", bindingPackage: "@node-rs/argon2-linux-arm64-gnu", exe: false },
  { name: "linux-x64-musl", os: "linux", arch: "x64", bunTarget: "bun-linux-x64-baseline-musl", bindingPackage: "@node-rs/argon2-linux-x64-musl", exe: false },
  { name: "linux-arm64-musl", os: "linux", arch: "arm64", bunTarget: "bun-linux-arm64-musl", bindingPackage: "@node-rs/argon2-linux-arm64-musl", exe: false },
  { name: "darwin-x64", os: "darwin", arch: "x64", bunTarget: "bun-darwin-x64-baseline", bindingPackage: "@node-rs/argon2-darwin-x64", exe: false },
  { name: "darwin-arm64", os: "darwin", arch: "arm64", bunTarget: "bun-darwin-arm64", bindingPackage: "@node-rs/argon2-darwin-arm64", exe: false },
  { name: "windows-x64", os: "windows", arch: "x64", bunTarget: "bun-windows-x64-baseline", bindingPackage: "@node-rs/argon2-win32-x64-msvc", exe: true },
];

/** The target this machine runs, for a plain `npm run build`. */
export function hostTarget(): ReleaseTarget {
  const os = process.platform === "win32" ? "windows" : process.platform;
  const musl = process.platform === "linux" && isMusl();
  const name = `${os}-${process.arch}${musl ? "-musl" : ""}`;
  const found = RELEASE_TARGETS.find((t) => t.name === name);
  if (!found) throw new Error(`no release target for this machine (${name})`);
  return found;
}

function isMusl(): boolean {
  // glibc's Bun reports its glibc version; musl's has none
  const report = (process as unknown as { report?: { getReport(): { header?: { glibcVersionRuntime?: string } } } }).report;
  return report?.getReport().header?.glibcVersionRuntime === undefined;
}

export function releaseFileName(version: string, target: ReleaseTarget): string {
  return `burrow-${version}-${target.name}${target.exe ? ".exe" : ""}`;
}
