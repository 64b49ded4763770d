ALTER TABLE "live_tunnels" ADD COLUMN "skip_warning" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "live_tunnels" ADD COLUMN "response_timeout_ms" integer;