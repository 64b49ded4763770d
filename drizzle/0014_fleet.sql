CREATE TABLE `live_agents` (
	`session_id` text PRIMARY KEY NOT NULL,
	`node_id` text NOT NULL,
	`user_id` integer NOT NULL,
	`username` text NOT NULL,
	`token_id` integer NOT NULL,
	`connected_at` text NOT NULL,
	`remote` text NOT NULL,
	`state` text NOT NULL,
	FOREIGN KEY (`node_id`) REFERENCES `cluster_nodes`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `live_agents_node` ON `live_agents` (`node_id`);--> statement-breakpoint
CREATE INDEX `live_agents_user` ON `live_agents` (`user_id`);--> statement-breakpoint
CREATE TABLE `token_configs` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`token_id` integer NOT NULL,
	`tunnels` text NOT NULL,
	`version` integer NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`token_id`) REFERENCES `tokens`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `token_configs_token` ON `token_configs` (`token_id`);