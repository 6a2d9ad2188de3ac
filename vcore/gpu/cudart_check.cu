// A CUDA runtime program (the path every framework takes: libcudart dlopens libcuda.so.1 and
// resolves the driver through cuGetProcAddress). Allocates STEP_MIB blocks until the runtime
// refuses and prints key=value lines for check.sh.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

int main(int argc, char **argv)
{
    size_t step = (size_t)(argc > 1 ? atoi(argv[1]) : 512) << 20;
    size_t free_b = 0, total_b = 0;
    cudaError_t rc = cudaMemGetInfo(&free_b, &total_b);
    printf("info when=before code=%d total_mib=%zu free_mib=%zu\n", (int)rc, total_b >> 20, free_b >> 20);
    std::vector<void *> blocks;
    for (int i = 0; i < 100000; i++) {
        void *p = nullptr;
        rc = cudaMalloc(&p, step);
        if (rc != cudaSuccess)
            break;
        blocks.push_back(p);
    }
    printf("result granted_mib=%zu code=%d name=%s\n", (blocks.size() * step) >> 20, (int)rc, cudaGetErrorName(rc));
    cudaGetLastError();
    for (void *p : blocks)
        cudaFree(p);
    rc = cudaMemGetInfo(&free_b, &total_b);
    printf("info when=after_free code=%d total_mib=%zu free_mib=%zu\n", (int)rc, total_b >> 20, free_b >> 20);
    return 0;
}
