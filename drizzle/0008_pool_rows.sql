ALTER TABLE `live_tunnels` ADD `hostname` text;--> statement-breakpoint
ALTER TABLE `live_tunnels` ADD `pool` text;--> statement-breakpoint
ALTER TABLE `live_tunnels` ADD `in_rotation` integer DEFAULT true NOT NULL;