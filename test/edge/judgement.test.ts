/**
 * The edge's one judgement (src/edge/judgement/pipeline.ts): the steps run
 * in their order for every door, a refusal at one step stops the ones
 * after it, and no step can be passed by: each case below is a visit only
 * that step refuses, so a pipeline that skipped it would forward it.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { AccessPolicy } from "../../src/edge/access/policy.ts";
import { judge, Refusal, STEPS, traceJudgement, type Door, type Step, type Visit } from "../../src/edge/judgement/pipeline.ts";
import type { TrafficMeter } from "../../src/edge/meter.ts";
import { Tunnel, type TunnelProtocol } from "../../src/edge/registry.ts";

const meter = { count() {} } as unknown as TrafficMeter;

function tunnel(protocol: TunnelProtocol = "http", opts: { allowCidrs?: string[]; relayed?: boolean } = {}): Tunnel {
  const t = new Tunnel(protocol, protocol === "http" || protocol === "tls" ? { subdomain: "demo" } : { port: 20000 }, 1, "alice", 1, false, meter);
  if (opts.allowCidrs) t.access = AccessPolicy.withUserAllowCidrs(undefined, "demo", opts.allowCidrs);
  t.relayed = opts.relayed ?? false;
  return t;
}

interface TestVisit extends Visit {
  client: string;
}

/** A door whose every part is told what to answer, and that writes down what ran. */
function door(parts: {
  find?: () => Tunnel | Refusal | Promise<Tunnel | Refusal>;
  reaches?: (t: Tunnel) => true | Refusal;
  standing?: () => undefined | Refusal | Promise<undefined | Refusal>;
  request?: () => undefined | Refusal | Promise<undefined | Refusal>;
}) {
  const ran: string[] = [];
  const outcome: { forwarded?: Tunnel; refused?: Refusal } = {};
  const d: Door<TestVisit> = {
    name: "http",
    find: () => {
      ran.push("find");
      return parts.find ? parts.find() : tunnel();
    },
    reaches: (t) => {
      ran.push("reaches");
      return parts.reaches ? parts.reaches(t) : true;
    },
    ...(parts.standing
      ? {
          standing: () => {
            ran.push("standing");
            return parts.standing!();
          },
        }
      : {}),
    ...(parts.request
      ? {
          request: () => {
            ran.push("request");
            return parts.request!();
          },
        }
      : {}),
    forward: (_v, t) => {
      ran.push("forward");
      outcome.forwarded = t;
    },
    refuse: (_v, r) => {
      ran.push("refuse");
      outcome.refused = r;
    },
  };
  return { door: d, ran, outcome };
}

const visit = (client = "192.0.2.1"): TestVisit => ({ client });

afterEach(() => traceJudgement(undefined));

describe("the judgement's steps", () => {
  test("are name, admission, access, forward, in that order, for a visit that passes", async () => {
    const steps: Step[] = [];
    traceJudgement((_door, step, outcome) => {
      expect(outcome).toBe("passed");
      steps.push(step);
    });
    const { door: d, ran, outcome } = door({ standing: () => undefined, request: () => undefined });
    await judge(d, visit());
    expect(steps).toEqual([...STEPS]);
    expect(ran).toEqual(["find", "standing", "reaches", "request", "forward"]);
    expect(outcome.forwarded).toBeDefined();
  });

  test("name: a visit whose name no tunnel has is refused there, and nothing after runs", async () => {
    const { door: d, ran, outcome } = door({ find: () => new Refusal("name", "UNKNOWN_NAME"), standing: () => undefined, request: () => undefined });
    await judge(d, visit());
    expect(ran).toEqual(["find", "refuse"]);
    expect(outcome.refused?.code).toBe("UNKNOWN_NAME");
  });

  test("admission: a tunnel of a kind the door does not reach is refused before its rules and the agent", async () => {
    const { door: d, ran, outcome } = door({ reaches: (t) => (t.protocol === "http" ? true : new Refusal("admission", "WRONG_KIND")), find: () => tunnel("tls"), request: () => undefined });
    await judge(d, visit());
    expect(ran).toEqual(["find", "reaches", "refuse"]);
    expect(outcome.refused?.step).toBe("admission");
  });

  test("admission: a connector's standing comes before the kind (nothing of the tunnel is told to one who may not reach it)", async () => {
    const { door: d, ran, outcome } = door({ standing: () => new Refusal("admission", "NOT_SHARED"), reaches: () => new Refusal("admission", "WRONG_KIND") });
    await judge(d, visit());
    expect(ran).toEqual(["find", "standing", "refuse"]);
    expect(outcome.refused?.code).toBe("NOT_SHARED");
  });

  test("admission: a standing that must be asked (a promise) is waited for, and its refusal stops the visit", async () => {
    const { door: d, ran, outcome } = door({ standing: () => Promise.resolve(new Refusal("admission", "TOKEN_REVOKED", "revoked")) });
    await judge(d, visit());
    expect(ran).toEqual(["find", "standing", "refuse"]);
    expect(outcome.refused?.code).toBe("TOKEN_REVOKED");
  });

  test("access: the tunnel's IP rules refuse an address outside them, for a door with no request rules too", async () => {
    const { door: d, ran, outcome } = door({ find: () => tunnel("tcp", { allowCidrs: ["10.0.0.0/8"] }) });
    await judge(d, visit("192.0.2.1"));
    expect(ran).toEqual(["find", "reaches", "refuse"]);
    expect(outcome.refused?.code).toBe("ADDRESS_REFUSED");
    expect(outcome.refused?.step).toBe("access");
  });

  test("access: an address inside the IP rules goes on", async () => {
    const { door: d, outcome } = door({ find: () => tunnel("tcp", { allowCidrs: ["10.0.0.0/8"] }) });
    await judge(d, visit("10.1.2.3"));
    expect(outcome.forwarded).toBeDefined();
  });

  test("access: the IP rules come before the request rules (no sign-in page for an address they refuse)", async () => {
    const { door: d, ran } = door({ find: () => tunnel("http", { allowCidrs: ["10.0.0.0/8"] }), request: () => undefined });
    await judge(d, visit("192.0.2.1"));
    expect(ran).toEqual(["find", "reaches", "refuse"]);
  });

  test("access: the request rules' refusal (a sign-in page) is the visit's answer, and it is not forwarded", async () => {
    const page = new Response("sign in", { status: 401 });
    const { door: d, ran, outcome } = door({ request: () => Promise.resolve(new Refusal("access", "SIGN_IN", undefined, page)) });
    await judge(d, visit());
    expect(ran).toEqual(["find", "reaches", "request", "refuse"]);
    expect(outcome.refused?.answer).toBe(page);
  });

  test("a tunnel of another node: its IP rules are that node's to apply (its relayed doors), not asked here", async () => {
    const { door: d, outcome } = door({ find: () => tunnel("tcp", { allowCidrs: ["10.0.0.0/8"], relayed: true }) });
    await judge(d, visit("192.0.2.1"));
    expect(outcome.forwarded).toBeDefined();
  });

  test("a name that must be waited for (another node, a restart) goes through the same steps once found", async () => {
    const { door: d, ran, outcome } = door({ find: () => Promise.resolve(tunnel("tcp", { allowCidrs: ["10.0.0.0/8"] })) });
    await judge(d, visit("192.0.2.1"));
    expect(ran).toEqual(["find", "reaches", "refuse"]);
    expect(outcome.refused?.code).toBe("ADDRESS_REFUSED");
  });

  test("the usual visit is judged at once, without a promise", () => {
    const { door: d, outcome } = door({ request: () => undefined });
    expect(judge(d, visit())).toBeUndefined();
    expect(outcome.forwarded).toBeDefined();
  });
});
