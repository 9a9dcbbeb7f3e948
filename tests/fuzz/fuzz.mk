# Builds the fuzz targets: clang, libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer, into build/fuzz/. Run from the repository root:
#
#   make -f tests/fuzz/fuzz.mk -j2
#
# (tests/fuzz/run.sh does, then runs them.) Every project source except
# proxy/main.c is compiled once, instrumented, into build/fuzz/libsluice-fuzz.a;
# each tests/fuzz/fuzz_<name>.c links against it.

FUZZ_CC ?= clang
# The source folders, as in the Makefile (proxy/main.c is not in the library).
FUZZ_DIRS := allowlist allowlist/lockfiles proxy/conn proxy/proto proxy/log proxy/crypto proxy/audit \
             proxy/daemon proxy/cmd
FUZZ_INC := $(FUZZ_DIRS:%=-I%) -Iproxy
O       := build/fuzz
PKGS    := libevent_core libevent_extra libevent_pthreads libcares inih libidn2 libpsl jansson \
           yaml-0.1 zlib expat
CFLAGS_FUZZ := -std=c17 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Wall -Wextra \
               $(FUZZ_INC) -Itests/fuzz $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
SAN_FUZZ := -fsanitize=address,undefined -fno-sanitize-recover=all
LIBS_FUZZ := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lmbedtls -lmbedx509 -lmbedcrypto \
             -lpthread -lm

LIB_SRC := $(sort $(foreach d,$(FUZZ_DIRS),$(wildcard $(d)/*.c)))
LIB_OBJ := $(LIB_SRC:%.c=$(O)/obj/%.o)
TARGETS := $(sort $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c)))
BINS    := $(TARGETS:%=$(O)/%)

.PHONY: all
.DELETE_ON_ERROR:
all: $(BINS)

$(O)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CFLAGS_FUZZ) $(SAN_FUZZ) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(O)/libsluice-fuzz.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# fuzz_lockfile: a project file the input does not give is absent, never
# read from the disk.
$(O)/fuzz_lockfile: EXTRA_LD := -Wl,--wrap=sl_project_file

# fuzz_config: the config loader, the allowlist file reader and the
# credentials reader open files through the harness (sl_fuzz_fopen,
# sl_fuzz_open), never the disk. Copies of their objects with fopen and open
# renamed are linked ahead of the archive.
CONFIG_OBJ := $(O)/obj-config/proxy/daemon/config.o $(O)/obj-config/allowlist/allowlist.o \
              $(O)/obj-config/proxy/daemon/credentials.o
$(O)/obj-config/%.o: $(O)/obj/%.o
	@mkdir -p $(dir $@)
	objcopy --redefine-sym fopen=sl_fuzz_fopen --redefine-sym open=sl_fuzz_open $< $@
$(O)/fuzz_config: EXTRA_OBJ := $(CONFIG_OBJ)
$(O)/fuzz_config: $(CONFIG_OBJ)

$(O)/%: tests/fuzz/%.c $(O)/libsluice-fuzz.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CFLAGS_FUZZ) $(SAN_FUZZ) -fsanitize=fuzzer -MMD -MP -MF $@.d $< $(EXTRA_OBJ) \
	  $(O)/libsluice-fuzz.a $(LIBS_FUZZ) $(EXTRA_LD) -o $@

-include $(LIB_OBJ:.o=.d) $(BINS:=.d)
