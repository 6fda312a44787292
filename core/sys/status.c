#include "status.h"

#include <stdarg.h>

static _Thread_local char rp_err_buf[512];
static _Thread_local rp_status rp_err_status = RP_OK;

const char *rp_last_error(void) { return rp_err_buf; }
rp_status rp_last_status(void) { return rp_err_status; }

rp_status rp_error(rp_status st, const char *fmt, ...)
{
    rp_err_status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rp_err_buf, sizeof rp_err_buf, fmt, ap);
    va_end(ap);
    return st;
}

const char *rp_status_name(rp_status st)
{
    switch (st) {
    case RP_OK: return "ok";
    case RP_ERR_SHAPE: return "shape";
    case RP_ERR_ARG: return "argument";
    case RP_ERR_RANGE: return "range";
    case RP_ERR_NOMEM: return "out of memory";
    case RP_ERR_IO: return "io";
    }
    return "unknown";
}
