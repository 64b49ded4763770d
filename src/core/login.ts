/**
 * Signing in with a password, to the admin API (checkLogin: admins only) or
 * the portal (checkPassword: any enabled user): one throttle for both, the
 * attempt reserved before the password is verified, and as slow for
 * unknown users, and for users without a password (made by company
 * sign-in), as for known ones.
 */
import type { UserRow } from "../db/schema.ts";
import { AppError } from "./errors.ts";
import { burnVerifyTime, verifyPassword } from "./passwords.ts";
import type { LoginThrottle } from "./login-throttle.ts";
import type { Users } from "./users.ts";

export async function checkPassword(
  users: Users,
  throttle: LoginThrottle,
  address: string,
  username: string,
  password: string,
): Promise<UserRow> {
  // given back if the lookup or the verification throws: an attempt the server could not judge is no failure
  using attempt = await throttle.reserve(address, username);
  const user = await users.byName(username);
  const ok = user && user.passwordHash !== "" ? await verifyPassword(user.passwordHash, password) : (await burnVerifyTime(password), false);
  if (!user || !ok) {
    attempt.failed();
    throw new AppError("UNAUTHORIZED", "invalid username or password");
  }
  attempt.succeeded();
  if (!user.enabled) throw new AppError("UNAUTHORIZED", "the account is disabled");
  return user;
}

export async function checkLogin(users: Users, throttle: LoginThrottle, address: string, username: string, password: string): Promise<UserRow> {
  const user = await checkPassword(users, throttle, address, username, password);
  if (user.role !== "admin") throw new AppError("FORBIDDEN", "administrator role required");
  return user;
}
