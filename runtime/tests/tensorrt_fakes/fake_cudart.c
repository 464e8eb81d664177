/* A stand-in for libcudart with the functions the shim looks up. Every call succeeds and
 * does nothing; cudaMalloc hands out a dummy non-null pointer. */
#include <stddef.h>

typedef int cudaError_t;
typedef void* handle_t;

static char dummy;

cudaError_t cudaMalloc(void** ptr, size_t size) { (void) size; *ptr = &dummy; return 0; }
cudaError_t cudaFree(void* ptr) { (void) ptr; return 0; }
cudaError_t cudaMemset(void* ptr, int value, size_t count) { (void) ptr; (void) value; (void) count; return 0; }
cudaError_t cudaStreamCreate(handle_t* stream) { *stream = &dummy; return 0; }
cudaError_t cudaStreamDestroy(handle_t stream) { (void) stream; return 0; }
cudaError_t cudaStreamSynchronize(handle_t stream) { (void) stream; return 0; }
cudaError_t cudaEventCreate(handle_t* event) { *event = &dummy; return 0; }
cudaError_t cudaEventDestroy(handle_t event) { (void) event; return 0; }
cudaError_t cudaEventRecord(handle_t event, handle_t stream) { (void) event; (void) stream; return 0; }
cudaError_t cudaEventSynchronize(handle_t event) { (void) event; return 0; }
cudaError_t cudaEventElapsedTime(float* ms, handle_t start, handle_t end) { (void) start; (void) end; *ms = 1.0f; return 0; }
const char* cudaGetErrorString(cudaError_t error) { (void) error; return "fake CUDA error"; }
