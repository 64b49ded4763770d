/**
 * The public port's listener, paused and resumed: when the port cannot be
 * listened on again, it keeps why (the code and Bun's message), which the
 * edge's log line says; a resume that works forgets it.
 */
import { expect, test } from "bun:test";
import { PublicListener } from "../../src/edge/public-listener.ts";

test("a resume that fails keeps the listen error (EADDRINUSE with the port taken meanwhile); one that works clears it", async () => {
  const listener = new PublicListener({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
  try {
    listener.pause();
    const squatter = Bun.listen({ hostname: "127.0.0.1", port: listener.port, socket: { data() {} } });
    try {
      expect(listener.resume()).toBe(false);
      expect(listener.paused).toBe(true);
      expect(listener.listenError).toStartWith("EADDRINUSE: ");
      expect(listener.listenError).toContain(String(listener.port));
    } finally {
      squatter.stop(true);
    }
    expect(listener.resume()).toBe(true);
    expect(listener.listenError).toBeUndefined();
    expect(await (await fetch(`http://127.0.0.1:${listener.port}/`)).text()).toBe("ok");
  } finally {
    await listener.stop(true);
  }
});
