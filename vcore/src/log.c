/* Logging: one line per event on stderr, quiet unless something is refused or VCORE_LOG asks. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "vcore.h"

int vc_log_level = VC_LOG_WARN;

static const char *const level_names[] = {"off", "error", "warn", "info", "debug"};

void vc_log_init(void)
{
    const char *env = getenv("VCORE_LOG");
    if (env == NULL || *env == '\0')
        return;
    for (int i = 0; i <= VC_LOG_DEBUG; i++) {
        if (strcasecmp(env, level_names[i]) == 0) {
            vc_log_level = i;
            return;
        }
    }
    if (strcasecmp(env, "warning") == 0)
        vc_log_level = VC_LOG_WARN;
}

void vc_log_write(int level, const char *fmt, ...)
{
    if (level > vc_log_level || level <= VC_LOG_OFF)
        return;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "vcore[%d]: %s: ", (int)getpid(), level_names[level]);
    if (n < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = strlen(buf);
    buf[len++] = '\n';
    /* A single write keeps lines from concurrent processes whole. */
    ssize_t rc = write(STDERR_FILENO, buf, len);
    (void)rc;
}

void vc_fmt_mib(char *buf, size_t len, uint64_t bytes)
{
    if (bytes % VC_MIB == 0)
        snprintf(buf, len, "%llu", (unsigned long long)(bytes / VC_MIB));
    else if (bytes >= VC_MIB)
        snprintf(buf, len, "%.1f", (double)bytes / (double)VC_MIB);
    else
        snprintf(buf, len, "%.6f", (double)bytes / (double)VC_MIB);
}
