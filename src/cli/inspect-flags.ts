/**
 * The request inspector's flags, shared by burrow http, tcp and start:
 *
 *   --inspect-addr HOST:PORT  listen exactly there (exit 2 if it cannot)
 *   --no-inspect              no inspector at all
 *   --inspect-keep N          requests kept (default 1000)
 *   --inspect-memory MIB      bodies kept, all together (default 256)
 *
 * Without --inspect-addr the inspector takes the first free port of
 * 127.0.0.1:4040-4049; with all ten taken the agent says so and runs on
 * without one.
 */
import { isLoopback, parseListenAddress, type ListenAddress } from "../agent/inspector/address.ts";
import { DEFAULT_KEEP, DEFAULT_MEMORY_MIB, DEFAULT_PORTS, MAX_KEEP, MAX_MEMORY_MIB } from "../agent/inspector/limits.ts";
import { InspectorListenError, startInspector, type Inspector, type InspectorStart } from "../agent/inspector/server.ts";
import type { AgentOutput } from "../agent/output.ts";
import type { FlagTable } from "../config/flags.ts";
import { UsageError } from "../usage-error.ts";

const DEFAULT_ADDRESSES = `${DEFAULT_PORTS.host}:${DEFAULT_PORTS.first}-${DEFAULT_PORTS.last}`;

export const INSPECT_FLAGS = {
  "inspect-addr": {
    type: "string",
    arg: "HOST:PORT",
    defaultText: `the first free of ${DEFAULT_ADDRESSES}`,
    help: "where the request inspector listens",
    details: `Exactly there (\`[::1]:4040\`, \`localhost:4041\`, \`127.0.0.1:0\` for any free port); if it cannot listen there, the agent exits 2 with the reason. Without it, with all ten ports taken, the agent says so in one line and runs its tunnels without an inspector. Anywhere but loopback, the agent warns that whoever reaches it sees every capture (it has no password).`,
  },
  "no-inspect": { type: "boolean", help: "no request inspector", details: "And no port taken." },
  "inspect-keep": {
    type: "string",
    arg: "N",
    default: String(DEFAULT_KEEP),
    help: "requests the inspector keeps",
    details: `1 to ${MAX_KEEP.toLocaleString("en-US")}; the oldest go first.`,
  },
  "inspect-memory": {
    type: "string",
    arg: "MIB",
    default: String(DEFAULT_MEMORY_MIB),
    help: "bodies the inspector keeps, in all",
    details: `MiB of bodies, all requests together, 1 to ${MAX_MEMORY_MIB.toLocaleString("en-US")}; past it the oldest requests go before \`--inspect-keep\` is reached.`,
  },
} as const satisfies FlagTable;

/**
 * For tests only: "FIRST-LAST" instead of 4040-4049, so the port scan can be
 * tested on ports no other test (or a real agent on the machine) is using.
 * Not a user setting: --inspect-addr is.
 */
const TEST_PORTS_ENV = "BURROW_TEST_INSPECT_PORTS";

export type InspectChoice = { on: false } | { on: true; address?: ListenAddress; keep: number; memoryBytes: number; ports: { first: number; last: number } };

/** The inspector flags checked; UsageError names the flag that is wrong. */
export function inspectChoice(values: Record<string, unknown>, env: Record<string, string | undefined> = process.env): InspectChoice {
  const rawAddress = values["inspect-addr"] as string | undefined;
  const rawKeep = values["inspect-keep"] as string | undefined;
  const rawMemory = values["inspect-memory"] as string | undefined;
  if (values["no-inspect"]) {
    if (rawAddress !== undefined || rawKeep !== undefined || rawMemory !== undefined) {
      throw new UsageError("--no-inspect turns the inspector off: leave out --inspect-addr, --inspect-keep and --inspect-memory");
    }
    return { on: false };
  }
  let address: ListenAddress | undefined;
  if (rawAddress !== undefined) {
    address = parseListenAddress(rawAddress);
    if (!address) throw new UsageError(`--inspect-addr must be HOST:PORT, such as 127.0.0.1:4040 or [::1]:4040 (got '${rawAddress}')`);
  }
  let keep = DEFAULT_KEEP;
  if (rawKeep !== undefined) {
    keep = /^[0-9]{1,6}$/.test(rawKeep) ? Number(rawKeep) : NaN;
    if (!(keep >= 1 && keep <= MAX_KEEP)) throw new UsageError(`--inspect-keep must be a number of requests from 1 to ${MAX_KEEP} (got '${rawKeep}')`);
  }
  let memoryMib = DEFAULT_MEMORY_MIB;
  if (rawMemory !== undefined) {
    memoryMib = /^[0-9]{1,6}$/.test(rawMemory) ? Number(rawMemory) : NaN;
    if (!(memoryMib >= 1 && memoryMib <= MAX_MEMORY_MIB)) throw new UsageError(`--inspect-memory must be a number of MiB from 1 to ${MAX_MEMORY_MIB} (got '${rawMemory}')`);
  }
  return { on: true, address, keep, memoryBytes: memoryMib * 1024 * 1024, ports: testPorts(env[TEST_PORTS_ENV]) ?? { first: DEFAULT_PORTS.first, last: DEFAULT_PORTS.last } };
}

function testPorts(raw: string | undefined): { first: number; last: number } | undefined {
  const m = raw ? /^([0-9]{1,5})-([0-9]{1,5})$/.exec(raw) : null;
  return m ? { first: Number(m[1]), last: Number(m[2]) } : undefined;
}

/**
 * Starts the inspector as chosen, before the output takes the terminal. An
 * --inspect-addr that cannot be listened on is a UsageError: exit 2, with
 * the reason.
 */
export function openInspector(choice: InspectChoice): InspectorStart | undefined {
  if (!choice.on) return undefined;
  try {
    return startInspector({ address: choice.address, keep: choice.keep, memoryBytes: choice.memoryBytes, ports: choice.ports });
  } catch (err) {
    if (err instanceof InspectorListenError) throw new UsageError(err.message);
    throw err;
  }
}

/** Tells `out` where the inspector is, or (all default ports taken) that there is none; returns the one running. */
export function announceInspector(started: InspectorStart | undefined, out: AgentOutput): Inspector | undefined {
  if (started?.kind === "busy") out.notice?.(`inspector off: ports ${started.tried} are all taken (give it one with --inspect-addr)`);
  if (started?.kind !== "listening") return undefined;
  out.inspector?.(started.inspector.url);
  if (!isLoopback(started.inspector.address.host)) {
    out.notice?.("the inspector listens beyond this machine, without a password: whoever reaches it sees every captured request, cookies and Authorization headers included");
  }
  return started.inspector;
}
