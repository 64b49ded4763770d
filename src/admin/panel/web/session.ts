/** Who is signed in and where the public side is, for every page. */
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Me, ServerInfo } from "./api.ts";

export interface Session {
  me: Me;
  /** Undefined until GET /api/server answered. */
  server?: ServerInfo;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error("useSession outside a signed-in panel");
  return session;
}
