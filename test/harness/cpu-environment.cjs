'use strict';
/**
 * Where a test run's CPU goes, per file (docs/testing.md). Jest's node environment that, with ADCP_TEST_CPU_FILE
 * set (jest.config.js picks it then), appends one JSON line per test file to that file: the Jest worker's CPU for
 * loading the file's modules (`loadMs`: from the environment's creation to the first event of the run), for running
 * it (`runMs`: hooks and tests, to the environment's teardown), and the CPU of child processes that ended meanwhile
 * (`childMs`: the sellers, CLI commands and workers it spawned and stopped). Servers the global setup started belong
 * to no file and are not in it. `scripts/test-cpu.mjs` sums the lines.
 */
const { appendFileSync, readFileSync } = require('node:fs');
const path = require('node:path');
const { TestEnvironment } = require('jest-environment-node');

/** CPU of this process's ended, waited-for children (cutime + cstime in /proc/self/stat), in ms. */
function childCpuMs() {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    // The fields after "(command)": state is field 3 of stat(5), so cutime (16) and cstime (17) are at 13 and 14.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[13]) + Number(fields[14])) * 1000) / 100; // clock ticks of 10 ms
  } catch {
    return 0;
  }
}

function cpuMs() {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

const sample = () => ({ cpu: cpuMs(), child: childCpuMs(), wall: Date.now() });

class CpuMeteredEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.file = path.relative(config.globalConfig.rootDir, context.testPath);
    this.created = sample();
    this.started = undefined;
  }

  async handleTestEvent(event) {
    if (event.name === 'run_start') this.started = sample();
  }

  async teardown() {
    const end = sample();
    const started = this.started ?? end;
    const line = {
      file: this.file,
      loadMs: Math.round(started.cpu - this.created.cpu),
      runMs: Math.round(end.cpu - started.cpu),
      childMs: Math.round(end.child - this.created.child),
      wallMs: end.wall - this.created.wall,
    };
    appendFileSync(process.env.ADCP_TEST_CPU_FILE, `${JSON.stringify(line)}\n`);
    await super.teardown();
  }
}

module.exports = CpuMeteredEnvironment;
