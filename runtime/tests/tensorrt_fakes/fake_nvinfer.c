/* A stand-in for libnvinfer exporting the four symbols the infopt shim looks up, for
 * runtime/tests/tensorrt_shim.rs. FAKE_VERSION is getInferLibVersion's answer; the
 * factories return NULL, as TensorRT does when it cannot create an object. */
#include <stddef.h>
#include <stdint.h>

#ifndef FAKE_VERSION
#error "compile with -DFAKE_VERSION=110400 (getInferLibVersion's encoding)"
#endif

int32_t getInferLibVersion(void) { return FAKE_VERSION; }

void* createInferBuilder_INTERNAL(void* logger, int32_t version)
{
    (void) logger;
    (void) version;
    return NULL;
}

void* createInferRuntime_INTERNAL(void* logger, int32_t version)
{
    (void) logger;
    (void) version;
    return NULL;
}
