/* rt.c -- error reports shared by the runtime modules (rt.h). */
#include <stdarg.h>
#include <stdio.h>

#include "rt.h"

int sb_rt_fail(sb_rt_err *e, int code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        e->code = code;
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void sb_rt_err_clear(sb_rt_err *e)
{
    if (e) {
        e->code = 0;
        e->msg[0] = '\0';
    }
}
