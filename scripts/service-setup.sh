# Sourced by scripts/run (one node, SQLite) and scripts/cluster (N nodes, PostgreSQL): what both do to set up
# the service and greet its user. Expects to run from the source tree's root.

# Builds folio-fcgi, folio-admin and folio-cli in Release (build-release/), and the JavaScript client's
# engine (WebAssembly) when it is missing or older than its sources, and the demo's ProseMirror modules
# (npm ci in demo/, from its committed lock) when they are missing or older than the lock. Without the
# engine the service runs as ever, and only the demo page and /client/ lack it; without the modules
# only the demo's rich text does.
folio_build_release() {
  cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DFOLIO_BUILD_TESTS=OFF -DFOLIO_BUILD_BENCH=OFF >/dev/null
  cmake --build build-release -j2 --target folio-fcgi folio-admin folio-cli
  local wasm=clients/js/dist/folio-engine.wasm
  if [ ! -s "$wasm" ] || [ -n "$(find include/folio clients/js/wasm -newer "$wasm" -type f -print -quit)" ]; then
    scripts/build-js || echo "building the JavaScript client failed (above); the demo page needs it" >&2
  fi
  if [ ! -f demo/node_modules/.package-lock.json ] || [ demo/package-lock.json -nt demo/node_modules/.package-lock.json ]; then
    (cd demo && npm ci --no-audit --no-fund --loglevel=error) || echo "npm ci in demo/ failed (above); the demo's rich text needs it" >&2
  fi
}

# The development key and token, and the service's URL, in var/dev-credentials (0600), for the database DB
# and the service at URL (default http://127.0.0.1:${FOLIO_PORT:-8080}): the key and token are kept while DB
# knows the key (it is not revoked), else a new key and token are made there; the file is rewritten on
# every start, so that after scripts/run and scripts/cluster, which keep different databases, and with
# any FOLIO_PORT it always matches the service that runs. Exports FOLIO_API_KEY, FOLIO_AUTH_TOKEN and
# FOLIO_URL (what folio-cli reads). FOLIO_ADMIN: the folio-admin to use (default build-release's).
folio_dev_credentials() {
  local db=$1 url=${2:-http://127.0.0.1:${FOLIO_PORT:-8080}} admin=${FOLIO_ADMIN:-build-release/tools/folio-admin} file=var/dev-credentials key_id=""
  if [ -s "$file" ]; then
    source "$file"
    key_id=${FOLIO_API_KEY:3:16}
    local line
    line=$("$admin" --db "$db" list | grep "^key   $key_id " || true)
    case $line in "" | *REVOKED*) key_id="" ;; esac
  fi
  if [ -z "$key_id" ]; then
    FOLIO_API_KEY=$("$admin" --db "$db" create-key dev)
    FOLIO_AUTH_TOKEN=$("$admin" --db "$db" create-token "${FOLIO_API_KEY:3:16}" dev-user)
  fi
  FOLIO_URL=$url
  (umask 077; printf 'FOLIO_API_KEY=%s\nFOLIO_AUTH_TOKEN=%s\nFOLIO_URL=%s\n' "$FOLIO_API_KEY" "$FOLIO_AUTH_TOKEN" "$FOLIO_URL" > "$file")
  export FOLIO_API_KEY FOLIO_AUTH_TOKEN FOLIO_URL
}

# The client-token signing keys (docs/OPERATIONS.md "Client tokens"), var/client-token.keys: one key made on
# first start, 0600. Every node of a cluster reads the same file.
folio_client_token_keys() {
  if [ ! -s var/client-token.keys ]; then
    (umask 077; printf '# <id> <secret hex> [verify-only]: every key verifies, the last one not verify-only signs\ndev1 %s\n' \
       "$(openssl rand -hex 32)" > var/client-token.keys)
  fi
}

# Waits (up to 10 s) until the service at URL answers /healthz.
folio_wait_ready() {
  for _ in $(seq 100); do curl -sf "$1/healthz" >/dev/null && return 0; sleep 0.1; done
  return 1
}

# Waits for the service at URL, adds the demo's records if absent (document "welcome" of organization
# "demo"), mints a client token for them (POST /v2/auth/token, a day long) and prints the greeting: the
# URL, the dev credentials, curl lines, and the demo's link. WHAT says what runs (database, nodes).
folio_welcome() {
  local url=$1 what=$2
  api() {
    curl -s "$url$1" -H 'Content-Type: application/json' \
      -H "x-folio-api-key: $FOLIO_API_KEY" -H "x-folio-auth-token: $FOLIO_AUTH_TOKEN" -d "$2"
  }
  folio_wait_ready "$url" || true   # the greeting goes out either way; a failed call shows in it
  # The demo's records, added once (an add of a record that exists answers 409 ALREADY_EXISTS: kept as is).
  local demo='"organizationId":"demo","documentId":"welcome"' minted demo_token demo_link
  api /v2/crdt/add "{\"data\":{$demo,\"editorId\":\"text\",\"type\":\"text\",\"data\":\"Hello from Folio! Edit me in two tabs.\\n\"}}" >/dev/null
  api /v2/crdt/add "{\"data\":{$demo,\"editorId\":\"tasks\",\"type\":\"array\",\"data\":[{\"title\":\"Open this page in a second tab\",\"done\":false},{\"title\":\"Run the curl line scripts/run printed\",\"done\":false}]}}" >/dev/null
  api /v2/crdt/add "{\"data\":{$demo,\"editorId\":\"rich\",\"type\":\"xml\",\"data\":\"<heading level=\\\"1\\\">Welcome to Folio</heading><paragraph>This is <strong>rich text</strong> on an <em>xml</em> record: open a second tab and type in both.</paragraph><bullet_list><list_item><paragraph>every tab shows the others' cursors</paragraph></list_item><list_item><paragraph>undo undoes only your own changes</paragraph></list_item></bullet_list>\"}}" >/dev/null
  minted=$(api /v2/auth/token "{\"data\":{$demo,\"userId\":\"demo-user\",\"access\":\"write\",\"expiresInSeconds\":86400}}")
  demo_token=$(printf '%s' "$minted" | sed -n 's/.*"token":"\([A-Za-z0-9._-]*\)".*/\1/p')
  if [ -n "$demo_token" ]; then
    demo_link="$url/demo/#token=$demo_token&org=demo&doc=welcome"
  else
    demo_link="(no client token: $minted)"
  fi
  cat <<MSG

Folio is running at $url  ($what)
  API key:    $FOLIO_API_KEY
  auth token: $FOLIO_AUTH_TOKEN

  curl -s $url/v2/crdt/add -H 'Content-Type: application/json' \\
    -H "x-folio-api-key: $FOLIO_API_KEY" -H "x-folio-auth-token: $FOLIO_AUTH_TOKEN" \\
    -d '{"data":{"organizationId":"org","documentId":"doc","editorId":"ed","type":"text","data":"Hello"}}'

  A client token for a browser (Authorization: Bearer <token>, or ?token= on subscribe):
  curl -s $url/v2/auth/token -H 'Content-Type: application/json' \\
    -H "x-folio-api-key: $FOLIO_API_KEY" -H "x-folio-auth-token: $FOLIO_AUTH_TOKEN" \\
    -d '{"data":{"organizationId":"org","documentId":"doc","userId":"ana","access":"write"}}'

  folio-cli reads FOLIO_URL, FOLIO_API_KEY and FOLIO_AUTH_TOKEN from the environment:
  set -a; source var/dev-credentials; set +a     # FOLIO_URL=$url
  build-release/tools/folio-cli --org demo --doc welcome --editor text watch

  The live demo (open it in two tabs; the link holds a client token valid for a day):
  $demo_link
  and an update through the REST API, which the open pages show without a reload:
  curl -s $url/v2/crdt/update -H 'Content-Type: application/json' \\
    -H "x-folio-api-key: $FOLIO_API_KEY" -H "x-folio-auth-token: $FOLIO_AUTH_TOKEN" \\
    -d '{"data":{"organizationId":"demo","documentId":"welcome","editorId":"text","data":"Hello from curl!\\n"}}'

Ctrl-C to stop.
MSG
}
