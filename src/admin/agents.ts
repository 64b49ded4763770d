/**
 * /api/agents: the agents connected now, on every node, one per session
 * (what they said of themselves, their tunnels, the config they run, their
 * last error), and the server's asks to one of them: connect again
 * (`restart`) or run `burrow update` (`update`). The agent decides by its
 * own flags (--remote-restart on by default, --remote-update off), and its
 * answer is this API's: 200 when it does it, 409 AGENT_REFUSED with its
 * words when it does not. The SSH gateway's sessions are listed too (their
 * key as device) and refuse every ask: OpenSSH's client is at the other end.
 */
import { json } from "../api/http.ts";
import { agentJson } from "../api/json.ts";
import { AgentJson, AskAcceptedJson, EntryList, ErrorBody } from "../api/responses.ts";
import { AppError } from "../core/errors.ts";
import type { AgentAsk } from "../core/live.ts";
import type { Route } from "./context.ts";

/** A session id as the list gives it; anything else names no agent. */
const SESSION_ID = /^[0-9a-f-]{36}$/;

function askRoute(action: AgentAsk): Route {
  const what = action === "restart" ? "connect again (its tunnels come back on the new connection, their names held meanwhile)" : "run `burrow update` (the new version runs once the agent is restarted)";
  return {
    path: `/api/agents/:id/${action}`,
    methods: {
      async POST(req, { core, audit }) {
        const id = req.params.id ?? "";
        audit.target = `agent:${id.slice(0, 64)}`;
        const result = SESSION_ID.test(id) ? await core.live.askAgent!(id, action) : { found: false as const };
        if (!result.found) throw new AppError("NOT_FOUND", `no agent ${id.slice(0, 64)} is connected (list them: GET /api/agents)`);
        if (!result.answered) throw new AppError("AGENT_NO_ANSWER", result.why ?? "the agent did not answer within 10 s");
        audit.details = { accepted: result.accepted };
        if (!result.accepted) throw new AppError("AGENT_REFUSED", `the agent refused: ${result.message}`);
        return json({ status: "accepted", message: result.message });
      },
    },
    audit: { POST: action === "restart" ? "agent.restart" : "agent.update" },
    docs: {
      POST: {
        summary: `Ask a connected agent to ${what}; the agent decides by its own flags`,
        responses: {
          200: { description: "The agent does it; `message` is its own words", schema: AskAcceptedJson },
          404: { description: "No agent of that id is connected", schema: ErrorBody },
          409: { description: "AGENT_REFUSED: the agent said no (its flag is off, or it is older than the server's asks), or it is an SSH gateway session, which takes no asks; the message is its answer", schema: ErrorBody },
          504: { description: "AGENT_NO_ANSWER: no answer within 10 s, or the agent's connection ended before it answered (the message says which)", schema: ErrorBody },
        },
      },
    },
  };
}

export const agentRoutes: Route[] = [
  {
    path: "/api/agents",
    methods: {
      async GET(_req, { core }) {
        const agents = await core.live.agents!();
        return json(agents.sort((a, b) => (a.connectedAt < b.connectedAt ? -1 : a.connectedAt > b.connectedAt ? 1 : 0)).map(agentJson));
      },
    },
    docs: {
      GET: { summary: "The agents connected now, on every node, one per connection: who, what they run on, their tunnels, the config they run, their last error", responses: { 200: { description: "Oldest connection first", schema: EntryList(AgentJson) } } },
    },
  },
  askRoute("restart"),
  askRoute("update"),
];
