/** Release versions: what one looks like, and which of two is newer (semver's order, prereleases before their release). */

/** 1.2.3, or 1.2.3-rc.1: what a release's file names carry. */
export const VERSION_PATTERN = /^[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}(?:-[0-9A-Za-z.-]{1,64})?$/;

export const isVersion = (s: string) => VERSION_PATTERN.test(s);

/** Negative when a is older than b, 0 when the same, positive when newer. */
export function compareVersions(a: string, b: string): number {
  return Bun.semver.order(a, b);
}
