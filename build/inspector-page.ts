/**
 * The request inspector's page, bundled at build time. From source the
 * inspector takes its page from an HTML import (src/agent/inspector/
 * page-files.ts); in an executable that would be a second HTML import beside
 * the admin panel's, and Bun lays two of them out in an order that changes
 * from one build to the next, so the same checkout would not give the same
 * bytes. This plugin replaces page-files.ts with a module holding the page
 * and its assets, bundled here once by Bun.build (minified, with absolute
 * asset paths, as the inspector serves them).
 */
import type { BunPlugin } from "bun";
import { join } from "node:path";
import { ROOT } from "./paths.ts";

const INSPECTOR = join(ROOT, "src", "agent", "inspector");

/** The page's files: "/" for the HTML, "/<name>" for each asset it names. */
export async function bundleInspectorPage(minify: boolean): Promise<{ path: string; type: string; base64: string }[]> {
  const result = await Bun.build({ entrypoints: [join(INSPECTOR, "web", "index.html")], minify, publicPath: "/" });
  if (!result.success) {
    for (const message of result.logs) console.error(message);
    throw new Error("the inspector's page did not bundle");
  }
  const files = await Promise.all(
    result.outputs.map(async (o) => ({
      path: o.path.endsWith(".html") ? "/" : `/${o.path.replace(/^\.\//, "")}`,
      type: o.type,
      base64: Buffer.from(await o.arrayBuffer()).toString("base64"),
    })),
  );
  // a fixed order, whatever order Bun returns them in
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** `files`: bundleInspectorPage's, made before the executable's own Bun.build (a build cannot run inside another's plugin). */
export function inspectorPagePlugin(files: { path: string; type: string; base64: string }[]): BunPlugin {
  const contents = [
    `const FILES = ${JSON.stringify(files)};`,
    "export async function loadPageFiles() {",
    "  return new Map(FILES.map((f) => [f.path, { body: Uint8Array.fromBase64(f.base64), type: f.type }]));",
    "}",
  ].join("\n");
  return {
    name: "inspector-page",
    setup(build) {
      build.onResolve({ filter: /page-files\.ts$/ }, (args) =>
        args.importer.startsWith(INSPECTOR) ? { path: "inspector-page", namespace: "inspector-page" } : undefined,
      );
      build.onLoad({ filter: /.*/, namespace: "inspector-page" }, () => ({ contents, loader: "js" }));
    },
  };
}
