#!/usr/bin/env node
// The `adcp-orchestrator` command. Installed from the package it runs the bundled CLI (dist/client/cli.js, built by
// `npm run build`, which `npm pack` runs); in a checkout that was not built it runs cli/main.ts through tsx, as
// `npm run cli` does.
const path = require('node:path');
const { existsSync } = require('node:fs');

const compiled = path.join(__dirname, 'dist', 'client', 'cli.js');
let cli;
if (existsSync(compiled)) {
  cli = require(compiled);
} else {
  require('tsx/cjs');
  cli = require(path.join(__dirname, '..', '..', 'cli', 'main.ts'));
}
cli.main().then((code) => {
  process.exitCode = code;
});
