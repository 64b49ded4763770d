/** Who is signed in, for every page, and a way to read it again after a change (a device added). */
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Me } from "./api.ts";

export interface MeState {
  me: Me;
  reload(): Promise<void>;
}

export const MeContext = createContext<MeState | null>(null);

export function useMe(): MeState {
  const state = useContext(MeContext);
  if (!state) throw new Error("useMe outside a signed-in portal");
  return state;
}
