/**
 * sdk/index.d.ts is burrow-agent's API as its users' editors see it; the
 * implementation (sdk/src/index.ts) takes its option and event types from
 * it and must implement the rest exactly: every function and class the
 * declarations export, with an assignable type, and the types the same
 * both ways. Checked by the TypeScript compiler on a file made for it (the
 * declarations copied, as the package ships them), so a change to one
 * without the other fails here.
 */
import { expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

test("the implementation matches the declarations the package ships", () => {
  const dir = mkdtempSync(join(tmpdir(), "burrow-sdk-types-"));
  try {
    mkdirSync(join(dir, "declared"));
    copyFileSync(join(ROOT, "sdk", "index.d.ts"), join(dir, "declared", "index.d.ts"));
    writeFileSync(
      join(dir, "check.ts"),
      `import type * as Declared from "./declared/index";
import * as Impl from ${JSON.stringify(join(ROOT, "sdk", "src", "index.ts"))};
type Equal<X, Y> = (<T>() => T extends X ? 1 : 2) extends <T>() => T extends Y ? 1 : 2 ? true : false;
// every declared export exists in the implementation, with a type that fits the declaration
// (Tunnel's constructor is the package's own: users get tunnels from forward())
export const exported: Omit<typeof Declared, "Tunnel" | "Session" | "Reached"> = Impl;
export const classes: Function[] = [Impl.Tunnel, Impl.Session, Impl.Reached];
export const reachOptions: Equal<Declared.ReachOptions, Impl.ReachOptions> = true;
export const reachedEvents: Equal<Declared.ReachedEvents, Impl.ReachedEvents> = true;
export const reached = (r: Impl.Reached): Declared.Reached => r;
export const connectOptions: Equal<Declared.ConnectOptions, Impl.ConnectOptions> = true;
export const session = (s: Impl.Session): Declared.Session => s;
export const options: Equal<Declared.ForwardOptions, Impl.ForwardOptions> = true;
export const events: Equal<Declared.TunnelEvents, Impl.TunnelEvents> = true;
export const requests: Equal<Declared.RequestInfo, Impl.RequestInfo> = true;
export const protocols: Equal<Declared.Protocol, Impl.Protocol> = true;
// and a tunnel of the implementation is one of the declarations'
export const tunnel = (t: Impl.Tunnel): Declared.Tunnel => t;
export const error = (e: Impl.BurrowError): Declared.BurrowError => e;
`,
    );
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({ extends: join(ROOT, "tsconfig.json"), compilerOptions: { typeRoots: [join(ROOT, "node_modules", "@types")] }, include: ["check.ts"], exclude: [] }),
    );
    const tsc = Bun.spawnSync([join(ROOT, "node_modules", ".bin", "tsc"), "--noEmit", "-p", join(dir, "tsconfig.json")], { cwd: dir, stdout: "pipe", stderr: "pipe" });
    expect(tsc.stdout.toString() + tsc.stderr.toString()).toBe("");
    expect(tsc.exitCode).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
