/* rt.c -- error reports and the clock shared by the runtime modules (rt.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

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

double sb_rt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
