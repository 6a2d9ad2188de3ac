/*
 * vcore-probe: allocate device memory in steps until the runtime refuses, and print what the
 * runtime reports, as key=value records on stdout (one record per line, first word = record type):
 *
 *   probe vendor=ascend device=0 runtime=libascendcl.so
 *   info when=before total_bytes=... free_bytes=... total_mib=8192 free_mib=8192
 *   alloc n=1 request_mib=2050 code=0 granted=1 allocated_mib=2050
 *   ...
 *   result granted=3 refused=1 code=207001 allocated_mib=6150
 *
 * The runtime is dlopen'ed and resolved the way frameworks do it (CUDA: dlsym of cuGetProcAddress
 * on the handle, then base names + CUDA version), so the probe exercises the same paths as
 * PyTorch. Usage: vcore-probe --vendor nvidia|ascend [--steps MIB[,MIB...]] [--max-steps N]
 * [--device N]. After the list of steps, the last step repeats until refused or --max-steps.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vendor_api.h>

#define MIB (1024.0 * 1024.0)
#define MAX_ALLOCS 4096

typedef int (*alloc_fn)(void *ctx, int dev, size_t size, uint64_t *handle);
typedef int (*free_fn)(void *ctx, uint64_t handle);
typedef int (*info_fn)(void *ctx, int dev, size_t *free_bytes, size_t *total_bytes);

struct runtime {
    const char *name;
    alloc_fn alloc;
    free_fn release;
    info_fn info;
    void *ctx;
};

/* ---- CUDA through cuGetProcAddress ---- */
typedef CUresult (*getproc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t);
struct cuda {
    getproc_v2_fn getproc_v2;
    getproc_fn getproc;
    CUresult (*init)(unsigned int);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*mem_get_info)(size_t *, size_t *);
    CUresult (*total_mem)(size_t *, CUdevice);
};

static void *cuda_sym(struct cuda *c, const char *name)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st = 0;
    if (c->getproc_v2 != NULL)
        return c->getproc_v2(name, &p, 12000, 0, &st) == CUDA_SUCCESS ? p : NULL;
    return c->getproc(name, &p, 12000, 0) == CUDA_SUCCESS ? p : NULL;
}

static int cuda_alloc(void *ctx, int dev, size_t size, uint64_t *h)
{
    (void)dev;
    CUdeviceptr p = 0;
    int rc = ((struct cuda *)ctx)->mem_alloc(&p, size);
    *h = p;
    return rc;
}
static int cuda_free(void *ctx, uint64_t h) { return ((struct cuda *)ctx)->mem_free((CUdeviceptr)h); }
static int cuda_info(void *ctx, int dev, size_t *f, size_t *t)
{
    (void)dev;
    return ((struct cuda *)ctx)->mem_get_info(f, t);
}

static int open_cuda(struct runtime *rt, int dev)
{
    static struct cuda c;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        printf("error stage=dlopen message=\"%s\"\n", dlerror());
        return -1;
    }
    c.getproc_v2 = (getproc_v2_fn)dlsym(h, "cuGetProcAddress_v2");
    c.getproc = (getproc_fn)dlsym(h, "cuGetProcAddress");
    if (c.getproc_v2 == NULL && c.getproc == NULL) {
        printf("error stage=dlsym message=\"no cuGetProcAddress in libcuda.so.1\"\n");
        return -1;
    }
    *(void **)&c.init = cuda_sym(&c, "cuInit");
    *(void **)&c.device_get = cuda_sym(&c, "cuDeviceGet");
    /* The primary context, as the CUDA runtime uses it. Not "cuCtxCreate": at version 12000 the driver
     * answers with cuCtxCreate_v3 (five arguments, since 11040), seen on an H200 as error 101. */
    *(void **)&c.primary_ctx_retain = cuda_sym(&c, "cuDevicePrimaryCtxRetain");
    *(void **)&c.ctx_set_current = cuda_sym(&c, "cuCtxSetCurrent");
    *(void **)&c.mem_alloc = cuda_sym(&c, "cuMemAlloc");
    *(void **)&c.mem_free = cuda_sym(&c, "cuMemFree");
    *(void **)&c.mem_get_info = cuda_sym(&c, "cuMemGetInfo");
    *(void **)&c.total_mem = cuda_sym(&c, "cuDeviceTotalMem");
    if (!c.init || !c.device_get || !c.primary_ctx_retain || !c.ctx_set_current || !c.mem_alloc || !c.mem_free ||
        !c.mem_get_info) {
        printf("error stage=getprocaddress message=\"missing CUDA entry points\"\n");
        return -1;
    }
    CUdevice d;
    CUcontext ctx;
    int rc = c.init(0);
    if (rc == CUDA_SUCCESS)
        rc = c.device_get(&d, dev);
    if (rc == CUDA_SUCCESS)
        rc = c.primary_ctx_retain(&ctx, d);
    if (rc == CUDA_SUCCESS)
        rc = c.ctx_set_current(ctx);
    if (rc != CUDA_SUCCESS) {
        printf("error stage=init code=%d\n", rc);
        return -1;
    }
    size_t total = 0;
    if (c.total_mem != NULL && c.total_mem(&total, d) == CUDA_SUCCESS)
        printf("device total_bytes=%zu total_mib=%.1f\n", total, total / MIB);
    *rt = (struct runtime){"libcuda.so.1", cuda_alloc, cuda_free, cuda_info, &c};
    return 0;
}

/* ---- AscendCL ---- */
struct acl {
    aclError (*init)(const char *);
    aclError (*set_device)(int32_t);
    aclError (*malloc_)(void **, size_t, int);
    aclError (*free_)(void *);
    aclError (*get_mem_info)(int, size_t *, size_t *);
};

static int acl_alloc(void *ctx, int dev, size_t size, uint64_t *h)
{
    (void)dev;
    void *p = NULL;
    int rc = ((struct acl *)ctx)->malloc_(&p, size, 0);
    *h = (uint64_t)(uintptr_t)p;
    return rc;
}
static int acl_free(void *ctx, uint64_t h) { return ((struct acl *)ctx)->free_((void *)(uintptr_t)h); }
static int acl_info(void *ctx, int dev, size_t *f, size_t *t)
{
    (void)dev;
    struct acl *a = ctx;
    int rc = a->get_mem_info(1 /* ACL_HBM_MEM */, f, t);
    if (rc == ACL_SUCCESS && *t == 0)
        rc = a->get_mem_info(0 /* ACL_DDR_MEM: 310P device memory */, f, t);
    return rc;
}

static int open_acl(struct runtime *rt, int dev)
{
    static struct acl a;
    void *h = dlopen("libascendcl.so", RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        printf("error stage=dlopen message=\"%s\"\n", dlerror());
        return -1;
    }
    *(void **)&a.init = dlsym(h, "aclInit");
    *(void **)&a.set_device = dlsym(h, "aclrtSetDevice");
    *(void **)&a.malloc_ = dlsym(h, "aclrtMalloc");
    *(void **)&a.free_ = dlsym(h, "aclrtFree");
    *(void **)&a.get_mem_info = dlsym(h, "aclrtGetMemInfo");
    if (!a.init || !a.set_device || !a.malloc_ || !a.free_ || !a.get_mem_info) {
        printf("error stage=dlsym message=\"missing AscendCL entry points\"\n");
        return -1;
    }
    int rc = a.init(NULL);
    if (rc == ACL_SUCCESS)
        rc = a.set_device(dev);
    if (rc != ACL_SUCCESS) {
        printf("error stage=init code=%d\n", rc);
        return -1;
    }
    *rt = (struct runtime){"libascendcl.so", acl_alloc, acl_free, acl_info, &a};
    return 0;
}

static void print_info(struct runtime *rt, int dev, const char *when)
{
    size_t f = 0, t = 0;
    int rc = rt->info(rt->ctx, dev, &f, &t);
    if (rc != 0) {
        printf("info when=%s code=%d\n", when, rc);
        return;
    }
    printf("info when=%s code=0 total_bytes=%zu free_bytes=%zu total_mib=%.1f free_mib=%.1f\n", when, t, f, t / MIB,
           f / MIB);
}

static int parse_steps(const char *text, double *steps, int max)
{
    int n = 0;
    char *copy = strdup(text), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL && n < max; tok = strtok_r(NULL, ",", &save)) {
        double v = strtod(tok, NULL);
        if (v <= 0) {
            free(copy);
            return -1;
        }
        steps[n++] = v;
    }
    free(copy);
    return n;
}

int main(int argc, char **argv)
{
    const char *vendor = NULL, *steps_text = "2050";
    int max_steps = 1000, dev = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--vendor") == 0 && i + 1 < argc)
            vendor = argv[++i];
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps_text = argv[++i];
        else if (strcmp(argv[i], "--max-steps") == 0 && i + 1 < argc)
            max_steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            dev = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s --vendor nvidia|ascend [--steps MIB[,MIB...]] [--max-steps N] [--device N]\n",
                    argv[0]);
            return 2;
        }
    }
    double steps[256];
    int nsteps = parse_steps(steps_text, steps, 256);
    if (vendor == NULL || nsteps <= 0 || max_steps <= 0 || max_steps > MAX_ALLOCS) {
        fprintf(stderr, "vcore-probe: need --vendor nvidia|ascend, positive --steps and 1..%d --max-steps\n",
                MAX_ALLOCS);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct runtime rt;
    int is_cuda = strcmp(vendor, "nvidia") == 0 || strcmp(vendor, "cuda") == 0;
    if (!is_cuda && strcmp(vendor, "ascend") != 0) {
        fprintf(stderr, "vcore-probe: unknown vendor %s (nvidia or ascend)\n", vendor);
        return 2;
    }
    printf("probe vendor=%s device=%d\n", is_cuda ? "nvidia" : "ascend", dev);
    if ((is_cuda ? open_cuda(&rt, dev) : open_acl(&rt, dev)) != 0)
        return 1;
    printf("runtime name=%s\n", rt.name);
    print_info(&rt, dev, "before");

    static uint64_t handles[MAX_ALLOCS];
    int granted = 0, refused = 0, last_code = 0;
    double allocated = 0;
    for (int n = 0; n < max_steps; n++) {
        double mib = steps[n < nsteps ? n : nsteps - 1];
        size_t size = (size_t)(mib * MIB);
        uint64_t h = 0;
        int rc = rt.alloc(rt.ctx, dev, size, &h);
        last_code = rc;
        if (rc == 0) {
            handles[granted++] = h;
            allocated += size / MIB;
        }
        printf("alloc n=%d request_mib=%.1f code=%d granted=%d allocated_mib=%.1f\n", n + 1, mib, rc, rc == 0,
               allocated);
        if (rc != 0) {
            refused = 1;
            break;
        }
    }
    print_info(&rt, dev, refused ? "at_refusal" : "at_end");
    printf("result granted=%d refused=%d code=%d allocated_mib=%.1f\n", granted, refused, last_code, allocated);
    for (int i = 0; i < granted; i++)
        rt.release(rt.ctx, handles[i]);
    print_info(&rt, dev, "after_free");
    return 0;
}
