/**
 * A visitor's stream the mux refuses is logged with the real reason (too
 * many streams, the connection closed) and whose connection it was, once
 * every 10 s per reason; Mux.open() says the reason as an OpenRefused.
 */
import { expect, test } from "bun:test";
import { openStream } from "../../src/edge/open-stream.ts";
import { Mux, OpenRefused } from "../../src/protocol/mux.ts";
import { captureConsole } from "../harness/console-lines.ts";

const logged = captureConsole("warn");

const edgeMux = (maxStreams?: number) => new Mux({ role: "edge", maxStreams, send: () => "sent" });

function refusedReason(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof OpenRefused) return err.reason;
    throw err;
  }
  throw new Error("expected OpenRefused");
}

test("Mux.open() refuses with its reason: too-many-streams past maxStreams, closed once closed", () => {
  const mux = edgeMux(1);
  mux.open({});
  expect(refusedReason(() => mux.open({}))).toBe("too-many-streams");
  mux.close();
  expect(refusedReason(() => mux.open({}))).toBe("closed");
});

test("too many streams on an agent's connection: no stream, and one line naming the reason and the session", () => {
  const mux = edgeMux(2);
  expect(openStream(mux, {}, false, { session: "s-1" })).toBeDefined();
  expect(openStream(mux, {}, true, { session: "s-1" })).toBeDefined();
  for (let i = 0; i < 5; i++) expect(openStream(mux, {}, false, { session: "s-1" })).toBeUndefined();
  const lines = logged.lines.filter((l) => l.includes("stream not opened"));
  expect(lines).toHaveLength(1);
  expect(lines[0]).toContain("reason=too-many-streams");
  expect(lines[0]).toContain("session=s-1");
  expect(lines[0]).toContain("streams=2");
  expect(lines[0]).not.toContain("closed");
});

test("a closed link to another node: the line says closed and names the node", () => {
  const mux = edgeMux();
  mux.close();
  expect(openStream(mux, {}, false, { node: "n2" })).toBeUndefined();
  const line = logged.lines.find((l) => l.includes("stream not opened"));
  expect(line).toContain("reason=closed");
  expect(line).toContain("node=n2");
});
