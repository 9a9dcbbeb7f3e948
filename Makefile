# sluice — build, run and test.
#
#   make deps    install the Debian packages that are missing (only those)
#   make         build build/sluice
#   make run     build, then run the gate on proxy/example/ in the foreground
#   make test    unit tests, then end-to-end tests, all under ASan + UBSan
#
# Every object is built twice: build/ (optimised, for use) and build/san/
# (AddressSanitizer + UndefinedBehaviorSanitizer, for the tests).

CC      ?= gcc
PKGS    := libevent_core libevent_extra libcares inih libidn2 libpsl jansson yaml-0.1 zlib expat
WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS  ?= -O2 -g
# The folders are the architecture (proxy/README.md): allowlist/ is the policy
# library and never sees proxy/'s headers (its objects are compiled with its
# own folders only); proxy/conn/ is the hot path; proxy/proto/ holds pure
# parsers, which include no library header (make check-layout).
ALLOWLIST_DIRS := allowlist allowlist/lockfiles
PROXY_DIRS := proxy proxy/conn proxy/proto proxy/log proxy/crypto proxy/audit proxy/daemon proxy/cmd
ALLOWLIST_INC := $(ALLOWLIST_DIRS:%=-I%)
PROXY_INC := $(ALLOWLIST_INC) $(PROXY_DIRS:%=-I%)
BASE_CFLAGS := -std=c17 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
ALL_CFLAGS := $(BASE_CFLAGS) $(PROXY_INC)
# Debian's mbedtls 2.28 ships no pkg-config file.
LIBS    := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lmbedtls -lmbedx509 -lmbedcrypto -lpthread
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# Debian packages: build, unit tests, end-to-end tests (python3-pip and
# cargo, Debian's 0.66: the pinned installs; strace: what npm writes while
# it downloads). Node and npm (the
# inspection tests' real clients) are taken from wherever they come from on
# this machine (nodesource's nodejs carries its own npm, which Debian's npm
# package would conflict with): Debian's are installed only when missing.
DEB_PKGS := gcc make pkg-config libevent-dev libc-ares-dev libmbedtls-dev libinih-dev \
            libidn2-dev libunistring-dev libpsl-dev publicsuffix libjansson-dev libyaml-dev zlib1g-dev libexpat1-dev libcmocka-dev \
            python3 python3-pytest python3-prometheus-client python3-cryptography git ca-certificates dnsmasq-base iproute2 util-linux curl openssl \
            podman runc clang libclang-rt-14-dev python3-pip cargo strace

LIB_SRC  := $(sort $(foreach d,$(ALLOWLIST_DIRS) $(filter-out proxy,$(PROXY_DIRS)),$(wildcard $(d)/*.c)))
MAIN_SRC := proxy/main.c
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))

OBJ      := $(LIB_SRC:%.c=build/%.o)
SAN_OBJ  := $(LIB_SRC:%.c=build/san/%.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=build/san/tests/%)

.PHONY: all deps run test unit fuzz lockfiles e2e e2e-static registry-check clean san static image check-layout
.DELETE_ON_ERROR:

all: build/sluice

build/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

build/san/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -MMD -MP -c $< -o $@

# allowlist/ is built without proxy/'s include folders: an include of a
# proxy header there fails the build.
build/allowlist/%.o: allowlist/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(ALLOWLIST_INC) -MMD -MP -c $< -o $@

build/san/allowlist/%.o: allowlist/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(ALLOWLIST_INC) $(SAN) -MMD -MP -c $< -o $@

# Pure parsers: proxy/proto/ may include only the C library and its own
# headers (no libevent, c-ares, mbedtls, jansson...), so they are tested and
# fuzzed as functions on bytes. And proxy/crypto/crypto.c is the only source
# of the program that pulls in an mbedtls header (a move to mbedtls 3
# changes one file; tests may use mbedtls to cross-check). Both checked on
# the preprocessor's own list of every header each file pulls in.
check-layout:
	@set -e; for f in proxy/proto/*.c; do \
	  deps=$$($(CC) $(BASE_CFLAGS) -Iproxy/proto -MM -MG $$f | tr ' \\' '\n\n' | grep '\.h$$' || true); \
	  bad=$$(echo "$$deps" | grep -v '^proxy/proto/' | grep -v '^$$' || true); \
	  if [ -n "$$bad" ]; then echo "check-layout: $$f includes headers outside proxy/proto/: $$bad" >&2; exit 1; fi; \
	  sys=$$($(CC) $(BASE_CFLAGS) -Iproxy/proto -M $$f | tr ' \\' '\n\n' | grep '\.h$$' | grep -E 'event2|ares|mbedtls|jansson|yaml|expat|idn2|psl|ini\.h' || true); \
	  if [ -n "$$sys" ]; then echo "check-layout: $$f includes library headers: $$sys" >&2; exit 1; fi; \
	done; \
	for f in $(LIB_SRC) $(MAIN_SRC); do \
	  [ "$$f" = proxy/crypto/crypto.c ] && continue; \
	  mb=$$($(CC) $(ALL_CFLAGS) -M $$f | tr ' \\' '\n\n' | grep '/mbedtls/' | head -3 | tr '\n' ' ' || true); \
	  if [ -n "$$mb" ]; then echo "check-layout: $$f includes mbedtls headers (only proxy/crypto/crypto.c may): $$mb" >&2; exit 1; fi; \
	done; echo "check-layout: proxy/proto/ is pure; allowlist/ builds without proxy/; only crypto.c includes mbedtls"

build/libsluice.a: $(OBJ)
	@rm -f $@
	ar rcs $@ $^

build/san/libsluice.a: $(SAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

build/sluice: build/proxy/main.o build/libsluice.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LIBS)

build/san/sluice: build/san/proxy/main.o build/san/libsluice.a
	$(CC) $(ALL_CFLAGS) $(SAN) -o $@ $^ $(LIBS)

build/san/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) build/san/libsluice.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(SAN) -Itests/unit -o $@ $< build/san/libsluice.a $(LIBS) -lcmocka

san: build/san/sluice $(UNIT_BIN)

# --- static binary and gate image (issue 5) ---------------------------------
# make static: build/static/sluice, linked fully statically against glibc.
# glibc, not musl: Debian ships the static archives (.a) of libevent, c-ares,
# mbedtls, inih, libidn2 (+ libunistring), libpsl, jansson, libyaml, zlib and
# expat built for glibc only; there are no musl builds of them to link.
# Static glibc warns about the NSS functions that libevent and c-ares contain
# (getaddrinfo, getservbyname, getprotobynumber, getservbyport_r). sluice
# never looks a name up through them: c-ares resolves with lookups "b" (DNS
# only), and the one getaddrinfo call (libevent's evhttp binding the admin
# address) is given a numeric address and port, which glibc answers without
# NSS. No NSS module is ever loaded (the image has none). Any other such
# function showing up in the link fails the build, to be checked first.
STATIC_LIBS   := -levent_extra -levent_core -lcares -linih -lpsl -lidn2 -lunistring \
                 -ljansson -lyaml -lz -lexpat -lmbedtls -lmbedx509 -lmbedcrypto -lpthread -lm
STATIC_NSS_OK := getaddrinfo|getprotobynumber|getservbyname|getservbyport_r
IMAGE         ?= localhost/sluice-gate:latest

static: build/static/sluice

build/static/sluice: build/proxy/main.o build/libsluice.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -static -o $@ $^ $(STATIC_LIBS) 2> build/static/link.log || { cat build/static/link.log; exit 1; }
	@if grep -o "Using '[a-z_0-9]*'" build/static/link.log | sort -u | grep -Ev "'($(STATIC_NSS_OK))'"; then \
	  echo "static link: glibc NSS function(s) above are new; check sluice never reaches them" >&2; rm -f $@; exit 1; fi
	@if readelf -lW $@ | grep -q 'program interpreter'; then echo "$@ is not static" >&2; rm -f $@; exit 1; fi

# make image: the gate image (docker/Containerfile, FROM scratch) from
# build/static/sluice, with podman (docker where podman is missing); prints
# its size and fails at 5 MB or more.
image: build/static/sluice
	docker/build-image.sh build/static/sluice $(IMAGE)

deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "all Debian packages present"; fi

run: deps
	$(MAKE) all
	@echo "sluice: starting on the example policy (proxy/example/); try, from another terminal:"
	@echo "  curl -x http://127.0.0.1:3128 https://deb.debian.org/debian/ -I"
	build/sluice run -c proxy/example/sluice.ini

# Unit tests, then end-to-end tests. The end-to-end suite runs in a network
# network and mount namespace of its own (unshare --net --mount); conftest.py
# refuses to start outside one.
test: deps
	$(MAKE) check-layout
	$(MAKE) san
	$(MAKE) unit
	$(MAKE) fuzz
	$(MAKE) fuzz-daemon
	$(MAKE) lockfiles
	$(MAKE) e2e
	$(MAKE) e2e-static
	$(MAKE) registry-check
	$(MAKE) bench-smoke

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $$t; done

# Every parser under libFuzzer (clang, ASan+UBSan), a few seconds each, from
# seeds and the fixtures; tests/fuzz/README.md tells how to run longer.
FUZZ_SECONDS ?= 2
fuzz:
	tests/fuzz/run.sh $(FUZZ_SECONDS)

# The running daemon, fuzzed through real sockets from the client side, the
# origin side and DNS at once (tests/fuzz/daemon/), in a network namespace of
# its own: a clang ASan+UBSan build with edge coverage, the committed corpus
# replayed first, then mutated; plain requests, opaque and inspected tunnels
# (--inspect on: a gate that cannot inspect fails it). FUZZ_DAEMON_SECONDS=3600
# runs an hour. A failing case is written to build/fuzz-daemon/crashes/ and
# fails the target; tests/fuzz/daemon/run.py --replay FILE replays it. See
# tests/fuzz/README.md.
FUZZ_DAEMON_SECONDS ?= 60
.PHONY: fuzz-daemon
fuzz-daemon:
	$(MAKE) -s -f tests/fuzz/daemon/daemon.mk -j2
	unshare --net --mount -- /usr/bin/python3 tests/fuzz/daemon/run.py --inspect on --seconds $(FUZZ_DAEMON_SECONDS) $(FUZZ_DAEMON_ARGS)

# allow-from-lockfile against every fixture under tests/lockfiles/, offline.
lockfiles: build/san/sluice
	SLUICE_BIN=$(CURDIR)/build/san/sluice unshare --net -- /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/lockfiles $(PYTEST_ARGS)

e2e: build/san/sluice build/static/sluice
	SLUICE_BIN=$(CURDIR)/build/san/sluice unshare --net --mount -- /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e $(PYTEST_ARGS)

# The same end-to-end tests against the static binary the image ships
# (the container tests already ran above).
e2e-static: build/static/sluice
	SLUICE_BIN=$(CURDIR)/build/static/sluice unshare --net --mount -- /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e --ignore=tests/e2e/test_container.py $(PYTEST_ARGS)

# npm ci from the real registry through the gate with a --pins allowlist
# (tests/registry/): the one test that reaches a real host, and only
# registry.npmjs.org:443, so it runs outside any network namespace. It
# skips, saying why, when the registry cannot be reached.
registry-check: build/san/sluice
	SLUICE_BIN=$(CURDIR)/build/san/sluice /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider tests/registry $(PYTEST_ARGS)

clean:
	rm -rf build

include bench/bench.mk

-include $(OBJ:.o=.d) $(SAN_OBJ:.o=.d) build/proxy/main.d build/san/proxy/main.d
