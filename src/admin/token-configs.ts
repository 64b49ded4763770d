/**
 * /api/tokens/:id/config: a device's tunnels kept on the server (its
 * remote config), burrow.yml's `tunnels:` map, run by `burrow start
 * --remote` with that token and sent to it again at each change, on
 * whichever node it is connected to. A map is checked by the agent's own
 * reader of burrow.yml (agent/settings/tunnels-json.ts) before it is kept:
 * a mistake is a 400 whose message starts with the field's path
 * (`tunnels.web.subdomain: ...`), as burrow.yml's mistakes do.
 */
import { badRequest } from "../core/errors.ts";
import { json, parseBody, parseId } from "../api/http.ts";
import { tokenConfigJson } from "../api/json.ts";
import { ErrorBody, TokenConfigBody, TokenConfigJson } from "../api/responses.ts";
import { readTunnelsJson, TunnelsJsonError } from "../agent/settings/tunnels-json.ts";
import type { Route } from "./context.ts";

/** The body's map, checked as burrow.yml's tunnels are; a 400 naming the field otherwise. */
export function checkedTunnels(body: { tunnels: Record<string, unknown> }): Record<string, unknown> {
  try {
    readTunnelsJson({ tunnels: body.tunnels });
  } catch (err) {
    if (err instanceof TunnelsJsonError) throw badRequest(err.message);
    throw err;
  }
  return body.tunnels;
}

export const tokenConfigRoutes: Route[] = [
  {
    path: "/api/tokens/:id/config",
    methods: {
      async GET(req, { core }) {
        return json(tokenConfigJson(await core.tokenConfigs.get(parseId(req.params.id))));
      },
      async PUT(req, { core, audit }) {
        const id = parseId(req.params.id);
        audit.target = `token:${id}`;
        const body = await parseBody(req, TokenConfigBody);
        const tunnels = checkedTunnels(body);
        // the names only: a tunnel's settings may hold passwords
        audit.details = { tunnels: Object.keys(tunnels) };
        return json(tokenConfigJson(await core.tokenConfigs.set(id, tunnels)));
      },
    },
    audit: { PUT: "token.config" },
    docs: {
      GET: { summary: "A device's tunnels kept on the server (its remote config), as burrow.yml's `tunnels:` map", responses: { 200: { description: "The config; version 0 and an empty map when none was set", schema: TokenConfigJson }, 404: { description: "No such token", schema: ErrorBody } } },
      PUT: {
        summary: "Set a device's tunnels: `burrow start --remote` with this token runs them, and follows each change within seconds, on every node",
        body: TokenConfigBody,
        responses: {
          200: { description: "Kept with the next version; its live agents are sent it now", schema: TokenConfigJson },
          400: { description: "A tunnel is not what burrow.yml takes: the message starts with the field's path (tunnels.web.subdomain: ...)", schema: ErrorBody },
          404: { description: "No such token", schema: ErrorBody },
        },
      },
    },
  },
];
