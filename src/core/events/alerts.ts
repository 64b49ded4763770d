/** The alert events (alert.*): what --alert-webhook is subscribed to. */
import { EVENT_TYPES, type EventType } from "./catalogue.ts";

export const ALERT_EVENTS: readonly EventType[] = EVENT_TYPES.filter((t) => t.startsWith("alert."));
