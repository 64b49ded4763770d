CREATE TABLE `cluster_nodes` (
	`id` text PRIMARY KEY NOT NULL,
	`url` text,
	`started_at` text NOT NULL,
	`heartbeat_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `live_tunnels` (
	`name` text PRIMARY KEY NOT NULL,
	`protocol` text NOT NULL,
	`subdomain` text,
	`port` integer,
	`node_id` text NOT NULL,
	`session_id` text,
	`user_id` integer NOT NULL,
	`username` text NOT NULL,
	`token_id` integer NOT NULL,
	`connected_at` text NOT NULL,
	`bytes_in` integer DEFAULT 0 NOT NULL,
	`bytes_out` integer DEFAULT 0 NOT NULL,
	`relayable` integer DEFAULT true NOT NULL,
	FOREIGN KEY (`node_id`) REFERENCES `cluster_nodes`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `live_tunnels_user` ON `live_tunnels` (`user_id`);--> statement-breakpoint
CREATE INDEX `live_tunnels_node` ON `live_tunnels` (`node_id`);--> statement-breakpoint
CREATE INDEX `live_tunnels_session` ON `live_tunnels` (`session_id`);