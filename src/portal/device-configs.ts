/**
 * /_burrow/api/me/tokens/:id/config: the tunnels a user keeps on the server
 * for one of their own devices (its remote config), as the admin API's
 * /api/tokens/:id/config has them, for their own tokens only (another's is
 * as unknown as one that does not exist). Checked by burrow.yml's own
 * reader before it is kept; `burrow start --remote` on the device runs it.
 */
import { json, parseBody, parseId } from "../api/http.ts";
import { tokenConfigJson } from "../api/json.ts";
import { ErrorBody, TokenConfigBody, TokenConfigJson } from "../api/responses.ts";
import { readTunnelsJson, TunnelsJsonError } from "../agent/settings/tunnels-json.ts";
import { badRequest, notFound } from "../core/errors.ts";
import type { Core } from "../core/index.ts";
import type { UserRow } from "../db/schema.ts";
import type { PortalRoute } from "./context.ts";

/** The token `id` when it is one of `user`'s; 404 otherwise, as for none at all. */
async function ownToken(core: Core, user: UserRow, id: number): Promise<number> {
  const token = await core.tokens.get(id).catch(() => undefined);
  if (!token || token.userId !== user.id) throw notFound("token");
  return token.id;
}

export const deviceConfigRoutes: PortalRoute[] = [
  {
    path: "/_burrow/api/me/tokens/:id/config",
    methods: {
      async GET(_req, { core, user, params }) {
        return json(tokenConfigJson(await core.tokenConfigs.get(await ownToken(core, user, parseId(params.id)))));
      },
      async PUT(req, { core, user, audit, params }) {
        const id = await ownToken(core, user, parseId(params.id));
        audit.target = `token:${id}`;
        const body = await parseBody(req, TokenConfigBody);
        try {
          readTunnelsJson({ tunnels: body.tunnels });
        } catch (err) {
          if (err instanceof TunnelsJsonError) throw badRequest(err.message);
          throw err;
        }
        // the names only: a tunnel's settings may hold passwords
        audit.details = { tunnels: Object.keys(body.tunnels) };
        return json(tokenConfigJson(await core.tokenConfigs.set(id, body.tunnels)));
      },
    },
    audit: { PUT: "device.config" },
    docs: {
      GET: { summary: "The tunnels kept on the server for one of the user's devices (burrow.yml's `tunnels:` map)", responses: { 200: { description: "Its config; version 0 when none was set", schema: TokenConfigJson }, 404: { description: "No such token of this user's", schema: ErrorBody } } },
      PUT: {
        summary: "Set one of the user's devices' tunnels: `burrow start --remote` on it runs them, and follows each change",
        body: TokenConfigBody,
        responses: {
          200: { description: "Kept; the device's live agent is sent it now", schema: TokenConfigJson },
          400: { description: "A tunnel is not what burrow.yml takes: the message starts with the field's path", schema: ErrorBody },
          404: { description: "No such token of this user's", schema: ErrorBody },
        },
      },
    },
  },
];
