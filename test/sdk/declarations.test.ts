/**
 * sdk/index.d.ts is burrow-agent's API as its users' editors see it; the
 * implementation (sdk/src/index.ts) takes its option and event types from
 * it and must implement the rest exactly: every function and class the
 * declarations export, with an assignable type, and the types the same
 * both ways. Checked by the TypeScript compiler on a file made for it (the
 * declarations copied, as the package ships them), so a change to one
 * without the other fails here. forward()'s options are the tunnel spec's
 * (src/agent/settings/tunnel-spec.ts) in its names, but for those not yet
 * in the package, plus the connection's own: an option added to the spec
 * and not declared, or declared and in neither, fails here too. Its
 * Protocol and a reached tunnel's protocol are the kind table's kinds and
 * private kinds (src/protocol/kinds.ts), written out by hand in the
 * declarations: a kind added to the table and not declared fails here.
 */
import { expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

/** The spec's options the package does not take yet. */
const NOT_YET_IN_THE_SDK = ["pool", "poolBalance", "healthCheck", "healthInterval", "routes", "proxyProtocol"];
/** What forward() takes besides the tunnel's options: the connection, the local service and the signal (`inspect` is the session's inspector there, not a tunnel's). */
const CONNECTION_OPTIONS = ["server", "token", "insecure", "proxy", "signal", "inspect", "protocol", "port", "addr", "handler"];
const union = (names: string[]) => names.map((n) => JSON.stringify(n)).join(" | ");

test("the implementation matches the declarations the package ships", () => {
  const dir = mkdtempSync(join(tmpdir(), "burrow-sdk-types-"));
  try {
    mkdirSync(join(dir, "declared"));
    copyFileSync(join(ROOT, "sdk", "index.d.ts"), join(dir, "declared", "index.d.ts"));
    writeFileSync(
      join(dir, "check.ts"),
      `import type * as Declared from "./declared/index";
import * as Impl from ${JSON.stringify(join(ROOT, "sdk", "src", "index.ts"))};
import type { OptionName } from ${JSON.stringify(join(ROOT, "src", "agent", "settings", "tunnel-spec.ts"))};
import type { PrivateKind, TunnelKind } from ${JSON.stringify(join(ROOT, "src", "protocol", "kinds.ts"))};
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
// the options are the spec's and the connection's, no more, no fewer
export const specOptions: Equal<keyof Declared.ForwardOptions, Exclude<OptionName, ${union(NOT_YET_IN_THE_SDK)}> | ${union(CONNECTION_OPTIONS)}> = true;
export const notYet: Equal<${union(NOT_YET_IN_THE_SDK)}, Extract<OptionName, ${union(NOT_YET_IN_THE_SDK)}>> = true;
export const events: Equal<Declared.TunnelEvents, Impl.TunnelEvents> = true;
export const requests: Equal<Declared.RequestInfo, Impl.RequestInfo> = true;
export const protocols: Equal<Declared.Protocol, Impl.Protocol> = true;
// the kinds the declarations write out are the kind table's, a private tunnel's its private kinds
export const kinds: Equal<Declared.Protocol, TunnelKind> = true;
export const reachedKinds: Equal<Declared.Reached["protocol"], PrivateKind> = true;
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

