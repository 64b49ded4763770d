ALTER TABLE `users` ADD `require_auth` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `users` ADD `allow_cidrs` text DEFAULT '' NOT NULL;