/**
 * `npm run sdk:pack`: the npm package burrow-agent (sdk/), built from the
 * agent's code in src/ into one ES module for Node.js 20+ and Bun, with its
 * declarations (sdk/index.d.ts), and packed by npm into
 * dist/sdk/burrow-agent-<version>.tgz. Everything it needs is bundled in
 * (valibot, ws): the package has no dependencies, native or not, and
 * nothing of the server.
 */
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../package.json" with { type: "json" };
import { bundlePages, pagesPlugin } from "./page-bundles.ts";

const ROOT = join(import.meta.dir, "..");
const OUT = join(ROOT, "dist", "sdk");
const PACKAGE = join(OUT, "package");

export async function buildSdk(): Promise<{ tarball: string; dir: string }> {
  rmSync(PACKAGE, { recursive: true, force: true });
  mkdirSync(PACKAGE, { recursive: true });
  // the request inspector's page, bundled here as the executable's is (its HTML import needs Bun)
  const pages = await bundlePages(true);
  const built = await Bun.build({
    entrypoints: [join(ROOT, "sdk", "src", "index.ts")],
    target: "node",
    format: "esm",
    // ws asks for these optional native speed-ups in a try: without them it works as it is
    external: ["bufferutil", "utf-8-validate"],
    define: { BURROW_TARGET: JSON.stringify(`burrow-agent ${pkg.version} (npm)`) },
    plugins: [
      pagesPlugin(pages),
      {
        // src/version.ts reads the version from package.json: only that goes in, not the server's dependency list
        name: "version-only",
        setup(build) {
          build.onLoad({ filter: /[\\/]package\.json$/ }, () => ({ contents: `export default ${JSON.stringify({ version: pkg.version })};`, loader: "js" }));
        },
      },
    ],
  });
  if (!built.success) throw new Error(`the package did not build:\n${built.logs.map(String).join("\n")}`);
  const [bundle] = built.outputs;
  writeFileSync(join(PACKAGE, "index.js"), await bundle!.text());
  copyFileSync(join(ROOT, "sdk", "index.d.ts"), join(PACKAGE, "index.d.ts"));
  copyFileSync(join(ROOT, "sdk", "README.md"), join(PACKAGE, "README.md"));
  writeFileSync(
    join(PACKAGE, "package.json"),
    `${JSON.stringify(
      {
        name: "burrow-agent",
        version: pkg.version,
        description: "Open a burrow tunnel from a Node.js or Bun program",
        type: "module",
        exports: { ".": { types: "./index.d.ts", default: "./index.js" } },
        types: "./index.d.ts",
        files: ["index.js", "index.d.ts", "README.md"],
        engines: { node: ">=20" },
        license: "MIT",
        sideEffects: false,
      },
      null,
      2,
    )}\n`,
  );
  const packed = Bun.spawnSync(["npm", "pack", "--silent", "--pack-destination", OUT], { cwd: PACKAGE, stdout: "pipe", stderr: "pipe" });
  if (packed.exitCode !== 0) throw new Error(`npm pack failed: ${packed.stderr.toString()}`);
  const name = packed.stdout.toString().trim().split("\n").pop()!;
  return { tarball: join(OUT, name), dir: PACKAGE };
}

if (import.meta.main) {
  const { tarball } = await buildSdk();
  console.log(`wrote ${tarball.replace(`${ROOT}/`, "")}`);
}
