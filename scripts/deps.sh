# Sourced by scripts/run, scripts/test and scripts/bench: installs the Debian packages Folio needs that are missing.
# One list for every command, so the run and test set-ups never drift apart; only the browser the tests
# drive (FOLIO_TEST_PACKAGES, a large download) is left out of scripts/run's set-up.
FOLIO_PACKAGES=(
  cmake make g++                 # toolchain
  libpugixml-dev                 # the engine's one dependency: XML markup
  clang libclang-rt-14-dev       # libFuzzer targets
  libgtest-dev libgmock-dev      # tests
  liblz4-dev                     # tests: the engine's LZ4 blocks checked against liblz4
  libbenchmark-dev               # benchmarks
  zlib1g-dev rapidjson-dev       # reading the editing traces; the service's JSON
  libzstd-dev                    # optional compression of encodings (folio::zstd)
  libfcgi-dev libsqlite3-dev libssl-dev   # the service: FastCGI, storage, key hashing
  libpq-dev                               # the service's PostgreSQL storage (libpq)
  libhiredis-dev                          # presence shared by N nodes through Redis (--presence-redis)
  libcurl4-openssl-dev openssl            # publishing to nginx; making the channel secret
  libsystemd-dev pkg-config               # folio-fcgi tells systemd it is ready (sd_notify)
  nginx-light libnginx-mod-nchan          # the front end (Nchan: live push to clients)
  libnginx-mod-http-set-misc              # nginx computes a subscriber's channel id (HMAC)
  libnginx-mod-http-echo                  # echo_sleep: Nchan's authorization subrequest yields first (nginx/folio.conf)
  python3 curl wrk               # end-to-end tests, the curl tour, the load benchmark
  emscripten                     # the engine as WebAssembly for the JavaScript client (scripts/build-js)
  nodejs npm                     # the JavaScript client's tests (Debian 12: Node 18, npm 9)
)
# Only for the tests and bench/browser.sh (they pass them to folio_install_deps): a browser for the client's tests
# in a real page (tests/e2e/browser_e2e.py; puppeteer-core drives it and downloads no browser itself), and
# the cluster's engines for the service tests' PostgreSQL pass and the end-to-end tests' 3-node cluster.
# scripts/cluster's engines (also the tests'): a private PostgreSQL cluster (scripts/pg-test-cluster: initdb,
# pg_ctl) and a private Redis for Nchan (scripts/redis-private).
FOLIO_CLUSTER_PACKAGES=(
  postgresql redis-server
)
FOLIO_TEST_PACKAGES=(
  chromium
  "${FOLIO_CLUSTER_PACKAGES[@]}"
)

# A package another one may provide: NodeSource's nodejs bundles npm (and conflicts with Debian's).
folio_provided() {
  case $1 in
    npm) command -v npm >/dev/null ;;
    *) return 1 ;;
  esac
}

# Installs what is missing of FOLIO_PACKAGES and of the packages named as arguments.
folio_install_deps() {
  local missing=()
  for p in "${FOLIO_PACKAGES[@]}" "$@"; do
    folio_provided "$p" || dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "Installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
}
