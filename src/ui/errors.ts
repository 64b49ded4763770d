/** The message to show for anything thrown by a call (or by a bug). */
export const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));
