/** Stylesheets imported from scripts are bundled by Bun into the page's CSS. */
declare module "*.css" {}
