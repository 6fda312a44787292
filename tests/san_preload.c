/* Preloaded after the ASan/UBSan runtimes into lua5.4 when tests/run runs busted with SANITIZE=1
 * (built by tests/run into $BUILD/san_preload.so, without sanitizers):
 *
 *   LD_PRELOAD=libasan.so:libubsan.so:$BUILD/san_preload.so lua5.4 /usr/bin/busted ...
 *
 *  - drops LD_PRELOAD from the environment once the loader has used it, so the programs the specs
 *    start (sh, gnuplot, python3, ...) do not run under ASan: gnuplot, for one, then reports
 *    libedit's leaks and exits 1. build-san/roper links its own runtime and needs no preload;
 *  - makes stdout line-buffered: when LeakSanitizer finds a leak it ends the process from an
 *    atexit handler, before stdio is flushed, and busted's summary line would be lost;
 *  - makes dlclose a no-op: lua_close unloads roper.so (and with it libopenblas and libgomp)
 *    before LeakSanitizer runs, and its reports would then show "<unknown module>" frames only.
 */
#include <stdio.h>
#include <stdlib.h>

int dlclose(void *handle);

int dlclose(void *handle) {
    (void)handle;
    return 0;
}

__attribute__((constructor)) static void san_preload_init(void) {
    unsetenv("LD_PRELOAD");
    setvbuf(stdout, NULL, _IOLBF, 0);
}
