/** Stylesheets imported by the console's entry point are bundled by esbuild into console.css. */
declare module '*.css';
