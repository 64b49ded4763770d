CREATE TABLE `acme_account` (
	`id` text PRIMARY KEY NOT NULL,
	`key_pem` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `acme_certificates` (
	`id` text PRIMARY KEY NOT NULL,
	`cert_pem` text NOT NULL,
	`key_pem` text NOT NULL,
	`not_after` text NOT NULL,
	`stored_by` text NOT NULL,
	`stored_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `acme_challenges` (
	`id` text PRIMARY KEY NOT NULL,
	`type` text NOT NULL,
	`name` text NOT NULL,
	`value` text NOT NULL,
	`expires_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `acme_challenges_name` ON `acme_challenges` (`name`);--> statement-breakpoint
CREATE TABLE `acme_on_demand` (
	`name` text PRIMARY KEY NOT NULL,
	`at_ms` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `acme_orders` (
	`id` text PRIMARY KEY NOT NULL,
	`node_id` text NOT NULL,
	`until_ms` integer NOT NULL
);
