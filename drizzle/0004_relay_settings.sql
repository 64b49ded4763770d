ALTER TABLE `live_tunnels` ADD `skip_warning` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `live_tunnels` ADD `response_timeout_ms` integer;