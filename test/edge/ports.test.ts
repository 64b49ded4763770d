/**
 * The TCP port allocator tells a taken port (EADDRINUSE: another one is
 * tried) from a listen that failed for another reason: that one is logged
 * with its code and refused with its cause, not as "no free port". Real
 * listens on loopback ports chosen free, and one on an address that is not
 * this machine's; the rest through a listen that fails as the test says.
 */
import { expect, test } from "bun:test";
import type { TCPSocketListenOptions } from "bun";
import { AppError } from "../../src/core/errors.ts";
import type { Core } from "../../src/core/index.ts";
import { TrafficMeter } from "../../src/edge/meter.ts";
import { PortAllocator, type Listen } from "../../src/edge/ports.ts";
import { Registry } from "../../src/edge/registry.ts";
import { freeRange } from "../harness/ports.ts";
import { captureConsole } from "../harness/console-lines.ts";

// the meter is never flushed here: no database behind it
const registry = new Registry(new TrafficMeter({} as Core));
const owner = { userId: 1, username: "ports", tokenId: 1 };
const make = (port: number) => registry.newTunnel("tcp", { port }, owner, false);

const logged = captureConsole("error");

/** A listen that fails with `code` on the ports `fails` says, and really listens on the others. */
function failing(code: string, fails: (port: number) => boolean): { listen: Listen; tried: number[] } {
  const tried: number[] = [];
  const listen: Listen = <Data>(options: TCPSocketListenOptions<Data>) => {
    tried.push(options.port!);
    if (fails(options.port!)) throw Object.assign(new Error(`Failed to listen at ${options.hostname}`), { code, syscall: "listen" });
    return Bun.listen(options);
  };
  return { listen, tried };
}

function refusal(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

test("out of descriptors (EMFILE): refused with that cause after one try, not 'no free port', and logged with port and code", () => {
  const range = freeRange(20);
  const { listen, tried } = failing("EMFILE", () => true);
  const ports = new PortAllocator(range, "127.0.0.1", registry, undefined, undefined, listen);
  const err = refusal(() => ports.bind(undefined, make));
  expect(err.code).toBe("PORT_UNAVAILABLE");
  expect(err.message).toMatch(/^port \d+ could not be listened on: the server has too many open files \(EMFILE\)$/);
  expect(tried).toHaveLength(1); // every other port would fail the same way
  const line = logged.lines.find((l) => l.includes("tcp tunnel port could not be listened on"));
  expect(line).toContain(`port=${tried[0]}`);
  expect(line).toContain("code=EMFILE");
});

test("a port asked for that may not be listened on (EACCES) is refused with that cause, not as 'in use'", () => {
  const range = freeRange(4);
  const { listen } = failing("EACCES", () => true);
  const ports = new PortAllocator(range, "127.0.0.1", registry, undefined, undefined, listen);
  const err = refusal(() => ports.bind(range.first + 1, make));
  expect(err.code).toBe("PORT_UNAVAILABLE");
  expect(err.message).toBe(`port ${range.first + 1} could not be listened on: the server is not permitted to listen on it (EACCES)`);
});

test("EACCES on some ports of the range: another port is found, as before", () => {
  const range = freeRange(10);
  const { listen } = failing("EACCES", (port) => port < range.first + 5);
  const ports = new PortAllocator(range, "127.0.0.1", registry, undefined, undefined, listen);
  const t = ports.bind(undefined, make);
  try {
    expect(t.port).toBeGreaterThanOrEqual(range.first + 5);
  } finally {
    t.onRemoved?.();
  }
});

test("EACCES on every port of the range: the refusal names it, not 'no free port'", () => {
  const range = freeRange(5);
  const { listen, tried } = failing("EACCES", () => true);
  const ports = new PortAllocator(range, "127.0.0.1", registry, undefined, undefined, listen);
  expect(refusal(() => ports.bind(undefined, make)).message).toMatch(/could not be listened on: .*\(EACCES\)$/);
  expect(new Set(tried).size).toBe(5);
  // one line for the whole search: the others wait out the quiet period
  expect(logged.lines.filter((l) => l.includes("code=EACCES"))).toHaveLength(1);
});

test("every port taken (EADDRINUSE) is still 'no free port', with nothing logged", () => {
  const range = freeRange(3);
  const held = [range.first, range.first + 1, range.last].map((port) => Bun.listen({ hostname: "127.0.0.1", port, socket: { data() {} } }));
  try {
    const ports = new PortAllocator(range, "127.0.0.1", registry);
    expect(refusal(() => ports.bind(undefined, make)).message).toBe(`no free port in ${range.first}-${range.last}`);
    expect(refusal(() => ports.bind(range.first, make)).message).toBe(`port ${range.first} is in use`);
    expect(logged.lines).toEqual([]);
  } finally {
    for (const l of held) l.stop(true);
  }
});

test("a real listen on an address that is not this machine's (EADDRNOTAVAIL) is refused with that cause", () => {
  const range = freeRange(3);
  // TEST-NET-1 (RFC 5737): never an address of this machine; nothing is sent anywhere
  const ports = new PortAllocator(range, "192.0.2.1", registry);
  const err = refusal(() => ports.bind(undefined, make));
  expect(err.message).toMatch(/could not be listened on: the server's --host is not an address of its machine \(EADDRNOTAVAIL\)$/);
});
