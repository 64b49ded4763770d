ALTER TABLE "live_tunnels" ADD COLUMN "hostname" text;--> statement-breakpoint
ALTER TABLE "live_tunnels" ADD COLUMN "pool" text;--> statement-breakpoint
ALTER TABLE "live_tunnels" ADD COLUMN "in_rotation" boolean DEFAULT true NOT NULL;