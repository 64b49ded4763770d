CREATE TABLE `reserved_subdomains` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`subdomain` text NOT NULL,
	`user_id` integer NOT NULL,
	`created_at` text NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `reserved_subdomains_subdomain` ON `reserved_subdomains` (`subdomain`);--> statement-breakpoint
CREATE INDEX `reserved_subdomains_user` ON `reserved_subdomains` (`user_id`);--> statement-breakpoint
CREATE TABLE `sessions` (
	`id_hash` text PRIMARY KEY NOT NULL,
	`user_id` integer NOT NULL,
	`created_at` text NOT NULL,
	`last_seen_at` text NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `sessions_user` ON `sessions` (`user_id`);--> statement-breakpoint
CREATE TABLE `tokens` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`user_id` integer NOT NULL,
	`device_name` text NOT NULL,
	`lookup` text NOT NULL,
	`secret_hash` text NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`created_at` text NOT NULL,
	`last_used` text,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tokens_lookup` ON `tokens` (`lookup`);--> statement-breakpoint
CREATE INDEX `tokens_user` ON `tokens` (`user_id`);--> statement-breakpoint
CREATE TABLE `traffic_daily` (
	`user_id` integer NOT NULL,
	`date` text NOT NULL,
	`bytes_in` integer DEFAULT 0 NOT NULL,
	`bytes_out` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`user_id`, `date`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `traffic_daily_date` ON `traffic_daily` (`date`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`username` text NOT NULL,
	`password_hash` text NOT NULL,
	`role` text DEFAULT 'user' NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`max_tunnels` integer DEFAULT 0 NOT NULL,
	`allowed_protocols` text DEFAULT 'http,tcp' NOT NULL,
	`traffic_limit` integer DEFAULT 0 NOT NULL,
	`traffic_period` text DEFAULT 'monthly' NOT NULL,
	`max_devices` integer DEFAULT 0 NOT NULL,
	`skip_warning` integer DEFAULT false NOT NULL,
	`can_use_proxy` integer DEFAULT true NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `users_username_nocase` ON `users` (lower("username"));