/**
 * Which kinds each door reaches, as the kinds' edge units say (their
 * `doors`): the judgement's admission step asks here (a door's `reaches`),
 * so that a new kind whose visitors come through a door that exists (a
 * port kind over TCP, a named kind over TLS) needs no edit of that door.
 */
import { KIND_NAMES, type TunnelKind } from "../../protocol/kinds.ts";
import type { DoorName } from "../judgement/pipeline.ts";
import { EDGE_KINDS } from "./index.ts";

const REACHED = new Map<DoorName, ReadonlySet<TunnelKind>>();
for (const kind of KIND_NAMES) {
  for (const door of EDGE_KINDS[kind].doors) {
    const kinds = (REACHED.get(door) as Set<TunnelKind> | undefined) ?? new Set<TunnelKind>();
    kinds.add(kind);
    REACHED.set(door, kinds);
  }
}

const NONE: ReadonlySet<TunnelKind> = new Set();

/** The kinds whose visitors come through `door`. */
export function kindsThrough(door: DoorName): ReadonlySet<TunnelKind> {
  return REACHED.get(door) ?? NONE;
}
