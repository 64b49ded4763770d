/** The database's clock in ms, as SQL: one clock for every node, whatever theirs say. */
export const NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint";
