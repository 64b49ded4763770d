/** What every admin route handler receives. */
import type { BunRequest } from "bun";
import type { Core } from "../core/index.ts";
import type { UserRow } from "../db/schema.ts";

export interface RequestContext {
  core: Core;
  /** The signed-in admin; absent only on login. */
  admin: UserRow;
  /** The client's address, for throttling and logs. */
  address: string;
}

export type Handler = (req: BunRequest<string>, ctx: RequestContext) => Response | Promise<Response>;

/** A route: its handlers by method, and whether it needs a session. */
export interface Route {
  path: string;
  methods: Partial<Record<"GET" | "POST" | "PUT" | "DELETE", Handler>>;
  public?: boolean;
}
