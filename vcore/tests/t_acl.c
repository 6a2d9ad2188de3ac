/* AscendCL with NPU_MEM_QUOTA=8192: Lab 20's 2050 MiB steps, 207001 past the quota, total = quota. */
#include <string.h>

#include "check.h"
#include <vendor_api.h>

aclError aclInit(const char *);
aclError aclrtSetDevice(int32_t);
aclError aclrtMalloc(void **, size_t, int);
aclError aclrtMallocCached(void **, size_t, int);
aclError aclrtFree(void *);
aclError aclrtGetMemInfo(int, size_t *, size_t *);

int main(int argc, char **argv)
{
    int limited = !(argc >= 2 && strcmp(argv[1], "passthrough") == 0);
    CHECK_EQ(aclInit(NULL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    size_t f, t;
    CHECK_EQ(aclrtGetMemInfo(1, &f, &t), ACL_SUCCESS);
    CHECK_EQ(t, (limited ? 8192 : 21525) * MiB);
    CHECK_EQ(f, t);
    void *p[4];
    for (int i = 0; i < 3; i++)
        CHECK_EQ(aclrtMalloc(&p[i], 2050 * MiB, 0), ACL_SUCCESS);
    CHECK_EQ(aclrtMalloc(&p[3], 2050 * MiB, 0), limited ? ACL_ERROR_RT_MEMORY_ALLOCATION : ACL_SUCCESS);
    if (!limited) {
        CHECK_EQ(aclrtFree(p[3]), ACL_SUCCESS);
        printf("ok\n");
        return 0;
    }
    CHECK_EQ(aclrtGetMemInfo(1, &f, &t), ACL_SUCCESS);
    CHECK_EQ(t, 8192 * MiB);
    CHECK_EQ(f, 2042 * MiB);
    void *c;
    CHECK_EQ(aclrtMallocCached(&c, 2042 * MiB, 0), ACL_SUCCESS);
    CHECK_EQ(aclrtMallocCached(&p[3], 1, 0), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_EQ(aclrtFree(c), ACL_SUCCESS);
    CHECK_EQ(aclrtFree(p[0]), ACL_SUCCESS);
    CHECK_EQ(aclrtMalloc(&p[0], 2050 * MiB, 0), ACL_SUCCESS);
    CHECK_EQ(aclrtGetMemInfo(1, NULL, &t), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetMemInfo(1, &f, NULL), ACL_ERROR_INVALID_PARAM);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(aclrtFree(p[i]), ACL_SUCCESS);
    CHECK_EQ(aclrtGetMemInfo(1, &f, &t), ACL_SUCCESS);
    CHECK_EQ(f, 8192 * MiB);
    printf("ok\n");
    return 0;
}
