CREATE TABLE "cluster_nodes" (
	"id" text PRIMARY KEY NOT NULL,
	"url" text,
	"started_at" text NOT NULL,
	"heartbeat_ms" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "live_tunnels" (
	"name" text PRIMARY KEY NOT NULL,
	"protocol" text NOT NULL,
	"subdomain" text,
	"port" integer,
	"node_id" text NOT NULL,
	"session_id" text,
	"user_id" integer NOT NULL,
	"username" text NOT NULL,
	"token_id" integer NOT NULL,
	"connected_at" text NOT NULL,
	"bytes_in" bigint DEFAULT 0 NOT NULL,
	"bytes_out" bigint DEFAULT 0 NOT NULL,
	"relayable" boolean DEFAULT true NOT NULL
);
--> statement-breakpoint
ALTER TABLE "live_tunnels" ADD CONSTRAINT "live_tunnels_node_id_cluster_nodes_id_fk" FOREIGN KEY ("node_id") REFERENCES "public"."cluster_nodes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "live_tunnels" ADD CONSTRAINT "live_tunnels_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "live_tunnels_user" ON "live_tunnels" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "live_tunnels_node" ON "live_tunnels" USING btree ("node_id");--> statement-breakpoint
CREATE INDEX "live_tunnels_session" ON "live_tunnels" USING btree ("session_id");