/** Where "now" comes from, so rules about time can be tested with a fixed clock. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** ISO 8601 UTC with milliseconds and Z, the API's timestamp format. */
export const isoTimestamp = (d: Date) => d.toISOString();

/** "YYYY-MM-DD" of the UTC day. */
export const utcDate = (d: Date) => d.toISOString().slice(0, 10);

/** "YYYY-MM-DD HH:MM:SS" (UTC), the format of an active tunnel's connected_at. */
export const utcDateTime = (d: Date) => d.toISOString().slice(0, 19).replace("T", " ");

/** The UTC day `days` days before d (negative goes forward). */
export function daysBefore(d: Date, days: number): Date {
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() - days));
}
