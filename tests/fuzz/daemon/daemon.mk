# The daemon fuzzer's build of sluice: clang, AddressSanitizer +
# UndefinedBehaviorSanitizer, and edge coverage (trace-pc-guard) counted by
# tests/fuzz/daemon/cov.c into the map the harness names with
# SLUICE_COVERAGE_MAP. Run from the repository root:
#
#   make -f tests/fuzz/daemon/daemon.mk -j2     # -> build/fuzz-daemon/sluice
#
# Every project source, proxy/main.c included, is compiled instrumented;
# cov.c is not (its callbacks would count themselves).

FD_CC   ?= clang
O       := build/fuzz-daemon
FD_DIRS := allowlist allowlist/lockfiles proxy/conn proxy/proto proxy/log proxy/crypto proxy/audit \
           proxy/daemon proxy/cmd
FD_INC  := $(FD_DIRS:%=-I%) -Iproxy
PKGS    := libevent_core libevent_extra libcares inih libidn2 libpsl jansson yaml-0.1 zlib expat
FD_CFLAGS := -std=c17 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Wall -Wextra \
             $(FD_INC) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
FD_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=all
FD_COV  := -fsanitize-coverage=trace-pc-guard
FD_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lmbedtls -lmbedx509 -lmbedcrypto -lpthread -lm

FD_SRC  := $(sort $(foreach d,$(FD_DIRS),$(wildcard $(d)/*.c))) proxy/main.c
FD_OBJ  := $(FD_SRC:%.c=$(O)/obj/%.o)

.PHONY: all
.DELETE_ON_ERROR:
all: $(O)/sluice

$(O)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FD_CC) $(FD_CFLAGS) $(FD_SAN) $(FD_COV) -MMD -MP -c $< -o $@

$(O)/obj/cov.o: tests/fuzz/daemon/cov.c
	@mkdir -p $(dir $@)
	$(FD_CC) $(FD_CFLAGS) $(FD_SAN) -MMD -MP -c $< -o $@

$(O)/sluice: $(FD_OBJ) $(O)/obj/cov.o
	$(FD_CC) $(FD_SAN) -o $@ $^ $(FD_LIBS)

-include $(FD_OBJ:.o=.d) $(O)/obj/cov.d
