/*
 * sleep for the lab image: like busybox's (seconds with an optional s/m/h/d suffix, or
 * "infinity"), but it exits on SIGTERM. A container's first process gets no default signal
 * action from the kernel, so a plain `sleep` as PID 1 ignores the kubelet's SIGTERM and every
 * pod deletion would wait out the whole grace period.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static double seconds(const char *arg)
{
    char *end = NULL;
    double value = strtod(arg, &end);
    if (end == arg || value < 0)
        return -2;
    switch (*end) {
    case '\0': case 's': return value;
    case 'm': return value * 60;
    case 'h': return value * 3600;
    case 'd': return value * 86400;
    default: return -2;
    }
}

int main(int argc, char **argv)
{
    double total = 0;
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "infinity") == 0) {
            for (;;)
                pause();
        }
        double s = seconds(argv[i]);
        if (s < 0) {
            static const char msg[] = "sleep: invalid time interval\n";
            (void)!write(2, msg, sizeof msg - 1);
            return 1;
        }
        total += s;
    }
    struct timespec ts = {(time_t)total, (long)((total - (time_t)total) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
    return 0;
}
