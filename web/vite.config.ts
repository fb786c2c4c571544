// Builds the console into dist/ with fixed file names (src/http/console.rs embeds them by name).
// index.html refers to each asset with `?v=<content hash>`, so the server can let browsers cache assets for good.
import { createHash } from 'node:crypto';
import { defineConfig, type Plugin } from 'vite';

function versionedAssets(): Plugin {
  return {
    name: 'agentd-versioned-assets',
    apply: 'build',
    transformIndexHtml: {
      order: 'post',
      handler(html, ctx) {
        if (!ctx.bundle) return html;
        for (const [fileName, output] of Object.entries(ctx.bundle)) {
          const content = output.type === 'chunk' ? output.code : output.source;
          const version = createHash('sha256').update(content).digest('hex').slice(0, 12);
          html = html.split(`"/${fileName}"`).join(`"/${fileName}?v=${version}"`);
        }
        return html;
      },
    },
  };
}

export default defineConfig({
  base: '/',
  plugins: [versionedAssets()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    cssCodeSplit: false,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    rollupOptions: {
      output: {
        entryFileNames: 'assets/console.js',
        chunkFileNames: 'assets/console-[name].js',
        assetFileNames: 'assets/console[extname]',
        inlineDynamicImports: true,
      },
    },
  },
  server: {
    // `npm run dev` against a local `cargo run` (127.0.0.1:8080).
    proxy: { '/api': 'http://127.0.0.1:8080', '/health': 'http://127.0.0.1:8080' },
  },
});
