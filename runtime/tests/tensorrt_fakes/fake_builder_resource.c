/* A stand-in for libnvinfer_builder_resource: when loaded, it creates "<its own path>.loaded",
 * so a test can see whether the shim preloaded it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void marker(void) {}

__attribute__((constructor)) static void on_load(void)
{
    Dl_info info;
    if (dladdr((void*) &marker, &info) == 0 || info.dli_fname == NULL)
    {
        return;
    }
    char path[4096];
    if (snprintf(path, sizeof path, "%s.loaded", info.dli_fname) >= (int) sizeof path)
    {
        return;
    }
    FILE* f = fopen(path, "w");
    if (f != NULL)
    {
        fclose(f);
    }
}
