#!/usr/bin/env bash
# Subscriber burst (issue 19): N EventSource subscribers (default 2,000) connect to one record at the
# same moment, through nginx + Nchan + the authorization hop to folio-fcgi (the standalone config).
# Every one must be greeted (subscribed) or refused with a JSON 503, and no nginx worker may die
# (Nchan 1.3.6 crashed a worker when its authorization subrequest failed at once: nginx/folio.conf).
# Prints the answers by kind, the workers that died (from nginx's error log), the time until every
# subscriber was answered and its p50/p99, against a baseline from the same run: the same number of
# subscribers connecting one after another.
#   bench/subscriber_burst.sh [N]
set -euo pipefail
source "$(dirname "$0")/support/http_stack.sh"
python3 bench/support/subscriber_burst.py "$url" "$key" "$token" "${1:-2000}" "$work/log/nginx-error.log"
