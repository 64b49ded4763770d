/**
 * docs/reference/events.md: every event burrow delivers to webhooks, from
 * the catalogue (src/core/events/catalogue.ts): its type, what it says,
 * whether users' own webhooks get it, its data's fields with their JSON
 * types (from the same valibot schema the code emits it by), and a
 * delivery's body with the catalogue's example.
 */
import { toJsonSchema } from "@valibot/to-json-schema";
import { EVENT_CATALOGUE, EVENT_TYPES, type EventType } from "../../src/core/events/catalogue.ts";
import { EVENT_SUBJECTS } from "../../src/core/events/subscriptions.ts";
import { anchor, code, generatedNotice, page, table } from "./markdown.ts";

type JsonSchema = { type?: string | string[]; items?: JsonSchema; enum?: unknown[]; anyOf?: JsonSchema[]; properties?: Record<string, JsonSchema>; required?: string[] };

/** A field's JSON type in words: string, integer, array of string, one of ..., or null. */
function typeWords(s: JsonSchema): string {
  if (s.anyOf) return s.anyOf.map(typeWords).join(" or ");
  if (s.enum) return `one of ${s.enum.map((x) => code(String(x))).join(", ")}`;
  if (s.type === "array") return `array of ${s.items ? typeWords(s.items) : "any"}`;
  return Array.isArray(s.type) ? s.type.join(" or ") : (s.type ?? "any");
}

/** The example a catalogue entry gives, as the body a receiver gets. */
export function exampleBody(type: EventType): string {
  const spec = EVENT_CATALOGUE[type];
  return JSON.stringify({ id: "evt_6hWl0LQmXyZ3bKc9TnR2aVfE", type, timestamp: "2026-07-01T12:00:00.000Z", data: spec.example }, null, 2);
}

function section(type: EventType): string {
  const spec = EVENT_CATALOGUE[type];
  const schema = toJsonSchema(spec.data, { errorMode: "ignore" }) as JsonSchema;
  const rows = Object.entries(schema.properties ?? {}).map(([name, s]) => [code(name), typeWords(s)]);
  return [
    `### ${type}`,
    spec.about,
    spec.user ? "Users' own webhooks (the portal's) get it when it concerns them." : "Admins' webhooks only.",
    table(["field of `data`", "type"], rows),
    "```json\n" + exampleBody(type) + "\n```",
  ].join("\n\n");
}

export function eventsReference(): string {
  const bySubject = EVENT_SUBJECTS.map((subject) => ({ subject, types: EVENT_TYPES.filter((t) => t.startsWith(`${subject}.`)) }));
  return page([
    generatedNotice("src/core/events/catalogue.ts"),
    "# Events reference",
    "Every event a webhook can subscribe to, by subject. A webhook names types, `subject.*` patterns or `*` ([events](../events.md)). Each delivery's body is a JSON object: `id` (the event's id, also the `webhook-id` header: the same on every attempt), `type`, `timestamp` (when it happened, ISO 8601 UTC) and `data`, whose fields are listed with each type. Fields may be added to `data` in later versions; none is taken away or changes type.",
    table(
      ["type", "users' own webhooks", "what"],
      EVENT_TYPES.map((t) => [`[${code(t)}](#${anchor(t)})`, EVENT_CATALOGUE[t].user ? "yes" : "", EVENT_CATALOGUE[t].about.split(/(?<=\.) /)[0]!]),
    ),
    ...bySubject.map(({ subject, types }) => [`## ${subject}`, ...types.map(section)].join("\n\n")),
  ]);
}
