/**
 * The agent's output with the inspector and a pool member's count in
 * front (relayOutput): every event reaches the output beneath, through the
 * handlers in front where they have one, bound to the output that has it;
 * an event neither has stays absent, so `out.event?.()` callers skip it.
 */
import { describe, expect, test } from "bun:test";
import type { AgentOutput, RequestEvent } from "../../src/agent/output.ts";
import { relayOutput } from "../../src/agent/output-relay.ts";
import { PoolMembership } from "../../src/agent/rotation.ts";

/** An output as a class (its methods read `this`), with no streamOpened. */
class Heard implements AgentOutput {
  readonly events: string[] = [];
  ready() {
    this.events.push("ready");
  }
  request(e: RequestEvent) {
    this.events.push(`request ${e.path}`);
  }
  connection() {
    this.events.push("connection");
  }
  reconnecting() {
    this.events.push("reconnecting");
  }
  refused() {
    this.events.push("refused");
  }
  notice(m: string) {
    this.events.push(`notice ${m}`);
  }
}

describe("relayOutput", () => {
  test("events go through the handlers in front, the rest straight to the output beneath, which keeps its `this`", () => {
    const beneath = new Heard();
    const front: string[] = [];
    const out = relayOutput(beneath, {
      request(e) {
        front.push(e.path);
        beneath.request(e);
      },
    });
    out.ready({ username: "u", session: "s", server: "x", tunnels: [] });
    out.request({ tunnel: "http", method: "GET", path: "/a", status: 200, ms: 1 });
    out.notice?.("hello");
    expect(front).toEqual(["/a"]);
    expect(beneath.events).toEqual(["ready", "request /a", "notice hello"]);
    expect(out.streamOpened).toBeUndefined();
    expect(out.flow).toBeUndefined();
  });

  test("a pool member counts what is in flight, in front of an output without streamOpened", () => {
    const beneath = new Heard();
    const pools = new PoolMembership(beneath, new Map(), new Map());
    const out = pools.counting(beneath);
    out.streamOpened!({ tunnel: "http", kind: "http" });
    out.streamOpened!({ tunnel: "http", kind: "http" });
    out.request({ tunnel: "http", method: "GET", path: "/a", status: 200, ms: 1 });
    expect((pools as unknown as { busy: number }).busy).toBe(1);
    expect(beneath.events).toEqual(["request /a"]);
  });
});
