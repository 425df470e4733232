#!/usr/bin/env node
// The `adcp-orchestrator` command. Installed from the package it runs the compiled CLI (dist/cli, emitted by
// `npm run build`, which `npm pack` runs); in a checkout that was not built it runs cli/main.ts through tsx, as
// `npm run cli` does.
const path = require('node:path');
const { existsSync } = require('node:fs');

const compiled = path.join(__dirname, '..', 'dist', 'cli', 'main.js');
let cli;
if (existsSync(compiled)) {
  cli = require(compiled);
} else {
  require('tsx/cjs');
  cli = require('./main.ts');
}
cli.main().then((code) => {
  process.exitCode = code;
});
