#!/usr/bin/env bash
# Schemathesis against api/openapi.json on the gateway as it runs (api/main.ts, authentication on), with credentials.
#
#   scripts/schemathesis.sh [extra schemathesis options, e.g. --max-examples 200]
#
# Starts its own stack on free loopback ports: a Temporal dev server (in memory, headless), a worker and the gateway
# with a fresh API key holding every role; installs schemathesis (PyPI) into tmp/schemathesis-venv on first use;
# runs every check (server errors, status codes, response schemas, headers, negative data, ignored auth...); stops
# everything it started. The exit code is schemathesis's: 0 when nothing failed. Logs go to tmp/schemathesis/.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=tmp/schemathesis-venv
OUT=tmp/schemathesis
mkdir -p "$OUT"
if [ ! -x "$VENV/bin/schemathesis" ]; then
  echo "Installing schemathesis into $VENV ..."
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'schemathesis>=4,<5'
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
TEMPORAL_PORT=$(free_port)
GATEWAY_PORT=$(free_port)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

wait_for() { # url, seconds, jq-free predicate on the body (grep pattern)
  local url=$1 seconds=$2 pattern=$3
  for _ in $(seq 1 $((seconds * 2))); do
    if curl -fsS "$url" 2>/dev/null | grep -q "$pattern"; then return 0; fi
    sleep 0.5
  done
  echo "Timed out waiting for $url ($pattern); see $OUT/*.log" >&2
  return 1
}

echo "Temporal dev server on 127.0.0.1:$TEMPORAL_PORT ..."
setsid .temporal/bin/temporal server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --headless \
  --log-level warn >"$OUT/temporal.log" 2>&1 &
PIDS+=($!)

KEY="adcpk.schemathesis.$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
rm -f "$OUT/keys.json" "$OUT/notification-key.json"
npx tsx api/auth/hash-key.ts --key "$KEY" --principal schemathesis --tenant schemathesis \
  --roles reader,buyer,approver,operator --file "$OUT/keys.json" >/dev/null

export TEMPORAL_ADDRESS="127.0.0.1:$TEMPORAL_PORT"
export ADCP_TASK_QUEUE=schemathesis
export ADCP_AGENTS_FILE="$PWD/agents.example.json"
# agents.example.json's demo-life-seller verifies HMAC webhooks with this secret; without it they answer 401 to all.
export DEMO_SELLER_WEBHOOK_SECRET="${DEMO_SELLER_WEBHOOK_SECRET:-$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')}"
export ADCP_API_KEYS_FILE="$PWD/$OUT/keys.json"
export ADCP_GATEWAY_HOST=127.0.0.1
export ADCP_GATEWAY_PORT="$GATEWAY_PORT"
export ADCP_RECONCILE_EVERY=off
export ADCP_NOTIFICATION_KEY_FILE="$PWD/$OUT/notification-key.json"
# The run checks conformance, not the rate limits (test/unit/auth-hardening.test.ts does): schemathesis's coverage
# phase is not paced by --rate-limit, and a 429 where it expects 401 counts as a failure.
export ADCP_RATE_LIMIT_PER_SECOND=1000 ADCP_ADDRESS_RATE_LIMIT_PER_SECOND=1000
unset ADCP_API_KEY ADCP_WEBHOOK_PORT ADCP_WEBHOOK_HOST

for _ in $(seq 1 120); do
  (echo >"/dev/tcp/127.0.0.1/$TEMPORAL_PORT") 2>/dev/null && break
  sleep 0.5
done
npx tsx -e "
  import { Connection } from '@temporalio/client';
  import { ensureSearchAttributes } from './scripts/lib/dev-server';
  import { ensureNotificationKeyFile } from './config/notification-key';
  (async () => {
    const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
    await ensureSearchAttributes(connection, 'default');
    ensureNotificationKeyFile(process.env.ADCP_NOTIFICATION_KEY_FILE!);
    await connection.close();
  })().catch((error) => { console.error(error); process.exit(1); });
"

echo "Worker and gateway (http://127.0.0.1:$GATEWAY_PORT) ..."
setsid npx tsx workers/main.ts >"$OUT/worker.log" 2>&1 &
PIDS+=($!)
setsid npx tsx api/main.ts >"$OUT/gateway.log" 2>&1 &
PIDS+=($!)
wait_for "http://127.0.0.1:$GATEWAY_PORT/healthz" 120 '"workers":"polling"'

echo "schemathesis run api/openapi.json --url http://127.0.0.1:$GATEWAY_PORT (Authorization: Bearer <key>) ..."
set +e
"$VENV/bin/schemathesis" --config-file scripts/schemathesis.toml run api/openapi.json \
  --url "http://127.0.0.1:$GATEWAY_PORT" \
  -H "Authorization: Bearer $KEY" \
  --checks all \
  --workers 1 \
  --rate-limit 900/m \
  --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-50}" \
  --report junit --report-dir "$OUT" \
  "$@" 2>&1 | tee "$OUT/run.log"
status=${PIPESTATUS[0]}
set -e
if grep -q ' 500 \|gateway: 500' "$OUT/gateway.log"; then echo "The gateway logged a 500: see $OUT/gateway.log" >&2; fi
exit "$status"
