CREATE TABLE `admin_keys` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`user_id` integer NOT NULL,
	`name` text NOT NULL,
	`lookup` text NOT NULL,
	`secret_hash` text NOT NULL,
	`created_at` text NOT NULL,
	`expires_at` text,
	`last_used` text,
	`revoked_at` text,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `admin_keys_lookup` ON `admin_keys` (`lookup`);--> statement-breakpoint
CREATE INDEX `admin_keys_user` ON `admin_keys` (`user_id`);--> statement-breakpoint
CREATE TABLE `audit_log` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`at` text NOT NULL,
	`user_id` integer,
	`username` text,
	`key_id` integer,
	`token_id` integer,
	`address` text NOT NULL,
	`action` text NOT NULL,
	`target` text,
	`outcome` text NOT NULL,
	`code` text,
	`details` text,
	`count` integer DEFAULT 1 NOT NULL,
	`bucket` text
);
--> statement-breakpoint
CREATE INDEX `audit_log_at` ON `audit_log` (`at`);--> statement-breakpoint
CREATE INDEX `audit_log_user` ON `audit_log` (`user_id`);--> statement-breakpoint
CREATE INDEX `audit_log_action` ON `audit_log` (`action`);--> statement-breakpoint
CREATE UNIQUE INDEX `audit_log_bucket` ON `audit_log` (`bucket`);