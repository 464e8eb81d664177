/* A stand-in for libnvonnxparser: the one factory the shim looks up, failing. */
#include <stddef.h>

void* createNvOnnxParser_INTERNAL(void* network, void* logger, int version)
{
    (void) network;
    (void) logger;
    (void) version;
    return NULL;
}
