/**
 * A change of the tunnels an agent runs (burrow.yml reloaded, the agent
 * API, burrow-agent's sessions, the server's remote config), carried out
 * without cutting what the others carry: on a session whose READY said
 * `live`, each tunnel that goes is given up (REMOVE) and each new one asked
 * for alone (ADD), and the others are not touched; a tunnel whose server
 * side settings changed is given up, then asked for again with them, and
 * one whose only change is its local service takes the new one in place.
 * On a server that predates this (no `live`), the connection starts again
 * with the new list, as before.
 *
 * Changes are carried out one at a time, in the order asked (Agent.retune),
 * each against what the one before left.
 */
import { unenforcedAccess } from "./access.ts";
import type { AgentTunnel, TunnelChange } from "./client-context.ts";
import type { SessionControl } from "./client-control.ts";
import { localAuthority, type LocalTarget } from "./local-target.ts";
import type { AgentOutput } from "./output.ts";

/** What a change does, worked out against the tunnels asked for now. */
export interface ChangePlan {
  /** The tunnels asked for after it, in the new order: kept ones are the objects asked for now (with the names granted). */
  next: AgentTunnel[];
  /** Tunnels asked for now that go (or are replaced). */
  gone: AgentTunnel[];
  /** Tunnels to ask for (new, or replacing one of `gone`). */
  come: AgentTunnel[];
  /** Kept tunnels whose local service changed: taken in place. */
  moved: { kept: AgentTunnel; to: AgentTunnel }[];
}

/** The change from the tunnels asked for now to `wanted`, by the tunnels' names. */
export function planChange(now: readonly AgentTunnel[], wanted: readonly AgentTunnel[], asked: ReadonlyMap<string, string>): ChangePlan {
  const byName = new Map(now.map((t) => [t.name, t]));
  const plan: ChangePlan = { next: [], gone: [], come: [], moved: [] };
  const staying = new Set<string>();
  for (const w of wanted) {
    const old = byName.get(w.name);
    // the server's side of it: what it was asked with (not the name granted since), and a pool member's health check
    if (old && asked.get(w.name) === JSON.stringify(w.request) && JSON.stringify(old.health) === JSON.stringify(w.health)) {
      staying.add(w.name);
      plan.next.push(old);
      if (!sameTarget(old.target, w.target) || (old.inspect ?? true) !== (w.inspect ?? true)) plan.moved.push({ kept: old, to: w });
      continue;
    }
    const fresh = { ...w, request: { ...w.request } };
    plan.next.push(fresh);
    plan.come.push(fresh);
  }
  for (const t of now) if (!staying.has(t.name)) plan.gone.push(t);
  return plan;
}

/** Whether two local targets lead to the same service the same way. */
function sameTarget(a: LocalTarget, b: LocalTarget): boolean {
  const plain = (t: LocalTarget): unknown => ({ ...t, allowUpgrade: t.allowUpgrade ? [...t.allowUpgrade].sort() : undefined, routes: t.routes?.map((r) => ({ prefix: r.prefix, target: plain(r.target) })), handler: undefined });
  return a.handler === b.handler && JSON.stringify(plain(a)) === JSON.stringify(plain(b));
}

/**
 * Carries a plan out on the live session: REMOVE for what goes, then ADD
 * for what comes, all sent at once (the server takes them in order) and
 * their answers awaited. Tunnels whose answer the connection's end cut off
 * stay asked for: the next HELLO asks for them.
 */
export async function applyLive(control: SessionControl, plan: ChangePlan, out: AgentOutput): Promise<TunnelChange> {
  const result: TunnelChange = { added: [], refused: [], removed: [], pending: [], reconnected: false };
  control.keepAsking(plan.next, plan.come);
  for (const { kept, to } of plan.moved) moveInPlace(control, kept, to);
  const removals = plan.gone.map(async (t) => {
    const view = control.viewNamed(t.name);
    if (!view) return;
    try {
      await control.remove(view.id);
      control.dropped(view.id);
      result.removed.push(t.name);
      out.tunnelRemoved?.(t.name);
    } catch {
      // the connection ended: the next HELLO does not ask for it
      result.removed.push(t.name);
    }
  });
  const additions = plan.come.map(async (t) => {
    let answer: Awaited<ReturnType<SessionControl["add"]>>;
    try {
      answer = await control.add(t.name, t.request);
    } catch {
      result.pending.push(t.name);
      return;
    }
    const g = answer.tunnel;
    // a server that took the tunnel's access rules or policy says so; one granted without them is not served
    const refusal = answer.refused ?? (g ? unenforcedAccess([t], { session: "", username: "", tunnels: [g] }) : { code: "PROTOCOL_ERROR", message: "the server answered with neither a tunnel nor a refusal" });
    if (g && refusal === undefined) {
      const view = control.granted(t, g);
      result.added.push(view);
      out.tunnelAdded?.(view);
      return;
    }
    if (g) void control.remove(g.id).catch(() => {}); // given back at once
    control.keepAsking(control.asked.filter((x) => x !== t));
    result.refused.push({ name: t.name, ...refusal! });
    out.tunnelRefused?.(t.name, refusal!.code, refusal!.message);
  });
  await Promise.all([...removals, ...additions]);
  return result;
}

/** A kept tunnel takes another local service (or inspector setting) in place: its streams from now on go there. */
function moveInPlace(control: SessionControl, kept: AgentTunnel, to: AgentTunnel): void {
  kept.target = to.target;
  kept.inspect = to.inspect;
  const view = control.viewNamed(kept.name);
  if (!view) return;
  view.target = to.target;
  view.local = `${to.target.tls ? "https://" : ""}${localAuthority(to.target)}`;
  view.inspect = to.inspect ?? true;
}

/** What a change did, in a few words: "1 added or changed (web), 1 removed (db)", or "no change". */
export function describeChange(c: TunnelChange): string {
  const parts: string[] = [];
  const said = (what: string, names: string[]) => names.length > 0 && parts.push(`${names.length} ${what} (${names.join(", ")})`);
  said("added or changed", c.added.map((t) => t.name));
  said("refused", c.refused.map((r) => `${r.name}: ${r.code}`));
  said("removed", c.removed);
  said("to be asked for when the connection is back", c.pending);
  if (c.reconnected) parts.push("the server is older: the connection started again");
  return parts.length > 0 ? parts.join(", ") : "no change";
}
