# bench/bench.mk: the benchmark (issue 6). The top-level Makefile includes it.
#
#   make bench        full run (about 25 minutes): the table goes to standard
#                     output and bench/README.md, raw results to
#                     bench/results/latest.json
#   make bench-smoke  about a second per mode; `make test` runs it so the
#                     harness cannot rot. Fails if a probe fails or a mode
#                     measures nothing; never asserts on speed. It includes
#                     the sessions pair with 100 sessions, at one C.
#   make bench-sessions  issue 13's pair alone (about 6 minutes): the gate
#                     with 10,000 sessions against the same gate without
#                     [sessions], 3 rounds; raw results to
#                     bench/results/sessions.json
#
# Both need root: bench/run.sh runs everything in a network namespace of its
# own (unshare --net), on loopback only.

BENCH_CFLAGS   := -std=c17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Wshadow \
                  -Wstrict-prototypes -Wmissing-prototypes
BENCH_BIN      := build/bench/loadgen build/bench/origin build/bench/floor build/bench/syscost \
                  build/bench/hashspeed
# Debian packages the benchmark needs beyond DEB_PKGS (it also uses
# dnsmasq-base, iproute2 and openssl from there). squid-openssl is squid
# built with OpenSSL, which ssl_bump needs (the squid-bump column); it
# conflicts with Debian's squid (GnuTLS) and replaces it, and the plain
# squid column runs the same binary without TLS in its config. libssl-dev:
# the load generator and the origin speak TLS through OpenSSL.
BENCH_DEB_PKGS := squid-openssl tinyproxy libssl-dev

.PHONY: bench bench-smoke bench-sessions bench-deps bench-bin

build/bench/%: bench/%.c bench/addr.h
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< $(BENCH_LDLIBS)

# the relay floor runs one thread per core
build/bench/floor: BENCH_CFLAGS += -pthread
# the load generator and the origin speak TLS for the inspection modes
build/bench/loadgen build/bench/origin: bench/benchtls.h
build/bench/loadgen build/bench/origin: BENCH_LDLIBS += -lssl -lcrypto

# what hashing a pinned body costs (issue 12): sluice's own SHA-256 on the
# SHA extensions, mbedtls's digests and AES-GCM, OpenSSL's digests
build/bench/hashspeed: bench/hashspeed.c proxy/crypto/sha256ni.c proxy/crypto/sha256ni.h
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -Iproxy/crypto -o $@ bench/hashspeed.c proxy/crypto/sha256ni.c -lmbedcrypto -lcrypto

bench-bin: $(BENCH_BIN)

# Installs squid-openssl, tinyproxy and libssl-dev if missing. Where a
# service manager runs, the Debian packages start their own daemons (squid
# on *:3128, sluice's default port; tinyproxy on 8888); the bench starts its
# own, so the freshly installed services are stopped and disabled again
# (squid-openssl's unit is squid.service).
bench-deps:
	@missing=""; for p in $(BENCH_DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  $(MAKE) --no-print-directory deps DEB_PKGS="$$missing" || exit 1; \
	  if [ -d /run/systemd/system ]; then \
	    for p in $$missing; do \
	      case $$p in squid-openssl) u=squid;; tinyproxy) u=tinyproxy;; *) continue;; esac; \
	      systemctl disable --now $$u >/dev/null 2>&1 || true; \
	    done; \
	  fi; \
	fi

bench: deps bench-deps
	$(MAKE) build/sluice $(BENCH_BIN)
	bench/run.sh

bench-smoke: bench-deps build/sluice $(BENCH_BIN)
	bench/run.sh --smoke -q

bench-sessions: build/sluice $(BENCH_BIN)
	bench/run.sh --only sluice-anon --only sluice-sessions --rounds 3 --json bench/results/sessions.json
