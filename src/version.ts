/**
 * What this program is: the package's version, and, in a compiled build,
 * the commit, date and target build/compile.ts wrote into it (--define).
 * Elsewhere (run from source, or compiled by hand) those say so.
 */
import pkg from "../package.json" with { type: "json" };

declare const BURROW_COMMIT: string | undefined;
declare const BURROW_BUILT_AT: string | undefined;
declare const BURROW_TARGET: string | undefined;

export const VERSION: string = pkg.version;

export const BUILD = {
  commit: typeof BURROW_COMMIT === "string" ? BURROW_COMMIT : "not recorded (not built by npm run build)",
  builtAt: typeof BURROW_BUILT_AT === "string" ? BURROW_BUILT_AT : "not recorded (not built by npm run build)",
  // the npm package (burrow-agent) runs this on Node.js too, where there is no Bun
  target: typeof BURROW_TARGET === "string" ? BURROW_TARGET : `${typeof Bun === "undefined" ? `node ${process.version}` : `bun ${Bun.version}`} on ${process.platform}-${process.arch}`,
};

/** Whether this runs as a compiled executable (`bun build --compile`), not as `bun src/main.ts`. */
export const isCompiled = () => typeof Bun !== "undefined" && (Bun.main.startsWith("/$bunfs/") || /^[A-Za-z]:[\\/]~BUN[\\/]/.test(Bun.main));

/** What `burrow version` prints: the version on the first line, then how it was built. */
export function versionText(): string {
  return `burrow ${VERSION}\ncommit  ${BUILD.commit}\nbuilt   ${BUILD.builtAt}\ntarget  ${BUILD.target}\n`;
}
