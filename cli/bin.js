#!/usr/bin/env node
// The `adcp-orchestrator` command: runs cli/main.ts through tsx (a dependency), as `npm run cli` does.
require('tsx/cjs');
require('./main.ts')
  .main()
  .then((code) => {
    process.exitCode = code;
  });
