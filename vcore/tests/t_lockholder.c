/* Takes the region lock with vcore's own region code, then dies holding it (SIGKILL). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vcore.h"

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    static struct vc_region r = {.open_mu = PTHREAD_MUTEX_INITIALIZER, .slot = -1};
    snprintf(r.path, sizeof r.path, "%s", argv[1]);
    if (vc_region_lock_for_test(&r) != 0)
        return 1;
    printf("locked\n");
    fflush(stdout);
    kill(getpid(), SIGKILL);
    return 1;
}
