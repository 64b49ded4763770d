/**
 * The argon2 native binding for a release target. Each platform's binding is
 * its own npm package (argon2's optionalDependencies), and npm installs only
 * the one for the machine it runs on. For another platform the package is
 * fetched with `npm pack` (the registry npm is set to use), at the version
 * and checked against the sha512 integrity that package-lock.json pins, then
 * unpacked into dist/.bindings. So a release embeds exactly the bytes the
 * lockfile names, whichever machine builds it.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./paths.ts";

interface LockedPackage {
  version: string;
  integrity: string;
}

function locked(pkg: string): LockedPackage {
  const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
    packages: Record<string, Partial<LockedPackage>>;
  };
  const entry = lock.packages[`node_modules/${pkg}`];
  if (!entry?.version || !entry.integrity) throw new Error(`${pkg} is not pinned in package-lock.json`);
  return { version: entry.version, integrity: entry.integrity };
}

function nodeFileIn(dir: string): string | undefined {
  if (!existsSync(dir)) return undefined;
  const file = readdirSync(dir).find((f) => f.endsWith(".node"));
  return file === undefined ? undefined : join(dir, file);
}

function installedVersion(dir: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

/** sha512-<base64>, as npm writes integrity */
function integrityOf(bytes: Uint8Array): string {
  return `sha512-${new Bun.CryptoHasher("sha512").update(bytes).digest("base64")}`;
}

/** The absolute path of the .node file for `pkg`, fetching it when this machine lacks it. */
export async function bindingFile(pkg: string): Promise<string> {
  const pin = locked(pkg);

  const installed = join(ROOT, "node_modules", pkg);
  if (installedVersion(installed) === pin.version) {
    const file = nodeFileIn(installed);
    if (file) return file;
  }

  const cache = join(ROOT, "dist", ".bindings", `${pkg.replace("/", "+")}@${pin.version}`);
  const cached = nodeFileIn(cache);
  if (cached) return cached;

  const work = join(ROOT, "dist", ".bindings", "download");
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    const npm = process.platform === "win32" ? "npm.cmd" : "npm";
    const packed = Bun.spawnSync([npm, "pack", `${pkg}@${pin.version}`, "--pack-destination", work, "--silent"], {
      cwd: work,
      stdout: "pipe",
      stderr: "pipe",
    });
    const tarball = readdirSync(work).find((f) => f.endsWith(".tgz"));
    if (packed.exitCode !== 0 || tarball === undefined) {
      throw new Error(`npm pack ${pkg}@${pin.version} failed: ${packed.stderr.toString().trim()}`);
    }
    const bytes = new Uint8Array(readFileSync(join(work, tarball)));
    const got = integrityOf(bytes);
    if (got !== pin.integrity) {
      throw new Error(`${pkg}@${pin.version}: integrity ${got} does not match package-lock.json's ${pin.integrity}`);
    }
    const files = await new Bun.Archive(bytes).files();
    const entry = [...files.entries()].find(([path]) => path.endsWith(".node"));
    if (!entry) throw new Error(`${pkg}@${pin.version} holds no .node file`);
    mkdirSync(cache, { recursive: true });
    const out = join(cache, entry[0].split("/").pop()!);
    writeFileSync(out, new Uint8Array(await entry[1].arrayBuffer()));
    return out;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
