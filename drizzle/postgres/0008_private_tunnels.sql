CREATE TABLE "private_names" (
	"owner_id" integer NOT NULL,
	"name" text NOT NULL,
	"protocol" text NOT NULL,
	"shares" text DEFAULT '[]' NOT NULL,
	"local_port" integer,
	"updated_at" text NOT NULL,
	CONSTRAINT "private_names_owner_id_name_pk" PRIMARY KEY("owner_id","name")
);
--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "can_share" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "private_names" ADD CONSTRAINT "private_names_owner_id_users_id_fk" FOREIGN KEY ("owner_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;