/** /api/users/:id/tokens and /api/tokens/:id. */
import type { Route } from "./context.ts";
import { json, parseBody, parseId } from "./http.ts";
import { tokenJson } from "./json.ts";
import { CreateTokenBody } from "./schemas.ts";

export const tokenRoutes: Route[] = [
  {
    path: "/api/users/:id/tokens",
    methods: {
      GET(req, { core }) {
        const user = core.users.get(parseId(req.params.id));
        return json(core.tokens.listForUser(user.id).map(tokenJson));
      },
      async POST(req, { core }) {
        const user = core.users.get(parseId(req.params.id));
        const body = await parseBody(req, CreateTokenBody);
        const { secret, row } = core.tokens.generate(user.id, body.device_name);
        return json(
          {
            token: secret,
            token_id: row.id,
            message: "Store this token now: it is shown only once and cannot be retrieved later.",
          },
          201,
        );
      },
    },
  },
  {
    path: "/api/tokens/:id",
    methods: {
      DELETE(req, { core }) {
        core.tokens.revoke(parseId(req.params.id));
        return json({ status: "revoked" });
      },
    },
  },
];
