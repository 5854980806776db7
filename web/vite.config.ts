import { defineConfig } from 'vite';

// Preact's JSX is compiled by Vite's own esbuild (no framework plugin), into the folder the Go
// binary embeds (internal/console).
export default defineConfig({
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: '../internal/console/dist/app',
    emptyOutDir: true,
    target: 'es2022',
    // One stylesheet and one script: the CSP allows no inline code.
    cssCodeSplit: false,
    modulePreload: { polyfill: false },
  },
});
